// cmd_eval.c: `fplab eval --ckpt FILE --policy LIST`: the validation loss of a trained model
// under inference policies (post-training quantization, trainer/eval.h), its per-site
// telemetry, and with --per-site 1 the loss with one site of each policy at a time.
// The resolved configuration goes to stderr, the results to stdout (table, csv, md or JSON
// lines with the trainer's telemetry).
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kernels/llama_ops.h"
#include "trainer/eval.h"
#include "util/fileio.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab eval --ckpt FILE [--policy LIST] [--per-site 0|1] [--data FILE] [--val-data FILE]\n"
            "                  [--batches N] [--batch B] [--threads N] [--telemetry off|sites|layers]\n"
            "                  [--format table|csv|json|md] [--out FILE] [--progress -1|0|1]\n\n"
            "Evaluates a checkpoint written by 'fplab train' under precision policies, as post-training\n"
            "quantization: the forward casts of each policy (weights, activations, attention, the KV cache,\n"
            "residual) are applied, the rest of the policy (gradients, optimizer, loss scaling) does\n"
            "nothing. The validation batches are the run's own (batch i of the validation split, keyed by\n"
            "the run's seed), so under fp32 and the run's --threads the loss is bitwise the run's last\n"
            "validation loss. Each row gives the loss, its increase over fp32 (delta) and the standard\n"
            "error of that increase over the batches (delta_se; the same batches under both). --format json\n"
            "prints one line per row with the per-site telemetry the trainer logs (overflow, underflow,\n"
            "subnormal, amax, scale).\n\n"
            "options:\n"
            "  --ckpt FILE         the checkpoint (required)\n"
            "  --policy LIST       comma-separated presets or policy files [fp32]; inference presets:\n"
            "                      w8-fp8, w8a8-fp8, w4-mxfp4, w4-nvfp4, w4a8-mx, kv8-fp8 (the KV\n"
            "                      cache), w8a8kv8-fp8 (fplab policy --list)\n"
            "  --per-site 0|1      1: also each forward site of each policy alone (the others fp32) [0]\n"
            "  --data FILE         validation data [the checkpoint's --data]\n"
            "  --val-data FILE     token shards: a validation shard [the checkpoint's --val-data]\n"
            "  --batches N         validation batches [the checkpoint's --eval-batches]\n"
            "  --batch B           sequences per batch [the checkpoint's --batch]\n"
            "  --threads N         OpenMP threads (0: one per processor; the last bits depend on it) [0]\n"
            "  --telemetry MODE    off | sites | layers (json output) [sites]\n"
            "  --format FMT        table | csv | json | md [table]\n"
            "  --out FILE          the results into FILE (written whole, then renamed) [stdout]\n"
            "  --progress -1|0|1   a progress line per evaluation on stderr (batch i/n, seconds);\n"
            "                      -1: when stderr is a terminal [-1]\n"
            "  -h, --help          this text\n\n"
            "examples:\n"
            "  build/fplab eval --ckpt runs/shakespeare/ckpt.bin --policy fp32,w8-fp8,w8a8-fp8,w4-mxfp4,w4-nvfp4,w4a8-mx\n"
            "  build/fplab eval --ckpt runs/shakespeare/ckpt.bin --policy kv8-fp8,w8a8-fp8,w8a8kv8-fp8\n"
            "  build/fplab eval --ckpt runs/shakespeare/ckpt.bin --policy w4-mxfp4 --per-site 1 --format json\n");
}

static ac_telemetry parse_telemetry(const char *s) {
    if (!strcmp(s, "off")) return AC_TEL_OFF;
    if (!strcmp(s, "sites")) return AC_TEL_SITES;
    if (!strcmp(s, "layers")) return AC_TEL_LAYERS;
    cli_die("eval: --telemetry '%s': expected off, sites or layers", s);
}

// The progress line of one evaluation: "\r  eval POLICY [SITE]: batch i/n, t s", ended by a
// newline after the last batch (an evaluation of 200 batches takes tens of seconds).
typedef struct {
    const char *policy, *site;
    double t0;
} eval_progress;

static void show_progress(void *arg, int done, int total) {
    const eval_progress *p = arg;
    fprintf(stderr, "\r  eval %s%s%s: batch %d/%d, %.1f s%s", p->policy, p->site ? " " : "", p->site ? p->site : "",
            done, total, fio_now() - p->t0, done == total ? "\n" : "");
    fflush(stderr);
}

// Points e's progress callback at pr (labelled policy, site) when show, else clears it.
static void progress_for(eval_model *e, eval_progress *pr, bool show, const char *policy, const char *site) {
    *pr = (eval_progress){policy, site, fio_now()};
    e->progress = show ? show_progress : NULL;
    e->progress_arg = pr;
}

// eval_loss, or exit: 2 for a policy the forward refuses, 1 out of memory.
static void run_eval(eval_model *e, const ac_policy *p, ac_telemetry tel, ac_ctx *ac, eval_result *res) {
    char msg[1024];
    const int st = eval_loss(e, p, tel, ac, res, msg, sizeof msg);
    if (st == EVAL_OK) return;
    fprintf(stderr, "fplab: eval: %s\n", msg);
    exit(st == EVAL_EINVAL ? CLI_EXIT_USAGE : 1);
}

typedef struct {
    cli_table t;
    cli_out out;
    eval_model *e;
    FILE *f;  // where the results go
    bool progress;
} rows;

// One result: a JSON line, or a table row.
static void emit(rows *r, const char *policy, const char *site, const eval_result *res, const ac_ctx *ac) {
    if (r->out == CLI_OUT_JSON) {
        eval_write_json(r->f, r->e, policy, site, res, ac);
        fflush(r->f);
        return;
    }
    cli_cell_str(&r->t, policy);
    cli_cell_str(&r->t, site ? site : "all");
    cli_cell_num(&r->t, res->loss);
    cli_cell_num(&r->t, res->delta);
    cli_cell_num(&r->t, res->delta_se);
    cli_cell_int(&r->t, res->tokens);
}

// Evaluates one policy (and with per_site each of its forward sites alone).
static void eval_policy(rows *r, const char *name, bool per_site, ac_telemetry tel) {
    ac_policy p;
    char msg[1024];
    const int st = ac_policy_load(&p, name, msg, sizeof msg);
    CLI_CHECK(st == AC_OK, "eval: --policy '%s': %s", name, msg);
    if (msg[0]) fprintf(stderr, "fplab: eval: policy '%s': warning: %s\n", name, msg);
    int ignored = 0;
    for (int s = 0; s < AC_NSITES; s++) ignored += p.site[s].active && !eval_site_in_forward(s);
    if (ignored)
        fprintf(stderr, "fplab: eval: policy '%s': %d site%s used only in training (gradients, optimizer) "
                        "change nothing here\n", p.name, ignored, ignored > 1 ? "s" : "");
    if (!eval_kv_per_token(&p))
        fprintf(stderr, "fplab: eval: policy '%s': note: attn.kv's scales span tokens (future ones included), "
                        "which a KV cache filled one token at a time cannot do\n", p.name);
    ac_ctx ac;
    eval_result res;
    eval_progress pr;
    progress_for(r->e, &pr, r->progress, p.name, NULL);
    run_eval(r->e, &p, tel, &ac, &res);
    emit(r, p.name, NULL, &res, &ac);
    ac_free(&ac);
    for (int s = 0; per_site && s < AC_NSITES; s++) {
        if (!p.site[s].active || !eval_site_in_forward(s)) continue;
        ac_policy one;
        eval_policy_only(&one, &p, s);
        progress_for(r->e, &pr, r->progress, p.name, ac_site_name(s));
        run_eval(r->e, &one, tel, &ac, &res);
        emit(r, p.name, ac_site_name(s), &res, &ac);
        ac_free(&ac);
    }
}

int cmd_eval(int argc, char **argv) {
    static const struct option lo[] = {
        {"ckpt", required_argument, 0, 'c'},     {"policy", required_argument, 0, 'p'},
        {"per-site", required_argument, 0, 'S'}, {"data", required_argument, 0, 'd'},
        {"val-data", required_argument, 0, 'v'}, {"batches", required_argument, 0, 'n'},
        {"batch", required_argument, 0, 'b'},    {"threads", required_argument, 0, 'j'},
        {"telemetry", required_argument, 0, 't'}, {"format", required_argument, 0, 'f'},
        {"out", required_argument, 0, 'o'},      {"progress", required_argument, 0, 'P'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    argv[0] = "fplab eval";
    const char *out_path = NULL;
    eval_opts o = {0};
    const char *policies = "fp32";
    bool per_site = false;
    int progress = -1;
    int threads = 0;
    ac_telemetry tel = AC_TEL_SITES;
    cli_out out = CLI_OUT_TABLE;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'c': o.ckpt = optarg; break;
        case 'p': policies = optarg; break;
        case 'S': per_site = cli_parse_long(optarg, "--per-site", 0, 1); break;
        case 'd': o.data = optarg; break;
        case 'v': o.val_data = optarg; break;
        case 'n': o.batches = (int)cli_parse_long(optarg, "--batches", 1, EVAL_BATCHES_MAX); break;
        case 'b': o.batch = (int)cli_parse_long(optarg, "--batch", 1, 65536); break;
        case 'j': threads = (int)cli_parse_long(optarg, "--threads", 0, 4096); break;
        case 't': tel = parse_telemetry(optarg); break;
        case 'f': out = cli_parse_out(optarg, 0xF); break;
        case 'o': out_path = optarg; break;
        case 'P': progress = (int)cli_parse_long(optarg, "--progress", -1, 1); break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("eval");
        }
    }
    CLI_CHECK(optind == argc, "eval: unexpected argument '%s' (options take the form --name value)", argv[optind]);
    CLI_CHECK(o.ckpt, "eval: --ckpt FILE is required (see 'fplab eval --help')");
    CLI_CHECK(policies[0], "eval: --policy: expected a comma-separated list of presets or policy files");
    // Every policy is checked before the (longer) evaluations start.
    char list[4096], msg[1024];
    CLI_CHECK(strlen(policies) < sizeof list, "eval: --policy: list longer than %zu characters", sizeof list - 1);
    snprintf(list, sizeof list, "%s", policies);
    for (char *save = NULL, *n = strtok_r(list, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        ac_policy p;
        CLI_CHECK(ac_policy_load(&p, n, msg, sizeof msg) == AC_OK, "eval: --policy '%s': %s", n, msg);
        CLI_CHECK(eval_policy_check(&p, msg, sizeof msg) == EVAL_OK, "eval: --policy '%s': %s", n, msg);
    }
    CLI_CHECK(!out_path || out_path[0], "eval: --out: expected a file name");
    const int nthreads = llama_ops_threads(threads);
    eval_model e;
    const int st = eval_open(&e, &o, msg, sizeof msg);
    if (st != EVAL_OK) {
        fprintf(stderr, "fplab: eval: %s\n", msg);
        return st == EVAL_ENOMEM ? 1 : CLI_EXIT_USAGE;
    }
    // Every input, those the checkpoint names included (its corpus and validation shard when no
    // --data or --val-data is given), and every policy file of the list.
    if (out_path) {
        enum { MAX_IN = 3 + sizeof list / 2 };
        fio_input in[MAX_IN] = {{"ckpt", o.ckpt, false}, {"data", e.data_path, true}, {"val-data", e.val_path, false}};
        int n = 3;
        snprintf(list, sizeof list, "%s", policies);
        for (char *save = NULL, *p = strtok_r(list, ",", &save); p && n < MAX_IN; p = strtok_r(NULL, ",", &save))
            in[n++] = (fio_input){"policy", p, false};
        CLI_CHECK(fio_refuse_inputs("out", out_path, in, n, msg, sizeof msg) == FIO_OK, "eval: %s", msg);
    }
    const llama_config *c = &e.m.cfg;
    fprintf(stderr, "fplab eval: %s: dim %d, layers %d, heads %d/%d, vocab %d, seq_len %d, %zu parameters; "
                    "data %s, %d batches of %d x %d tokens (seed %llu), threads %d, policies %s%s\n",
            o.ckpt, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len, e.m.n_params,
            e.data_path, e.batches, e.B, e.T, (unsigned long long)e.seed, nthreads, policies,
            per_site ? ", one site at a time too" : "");
    const bool show = progress == 1 || (progress == -1 && isatty(STDERR_FILENO));
    eval_result base;
    eval_progress pr;
    progress_for(&e, &pr, show, "fp32", "(the baseline)");
    if (eval_baseline(&e, &base, msg, sizeof msg) != EVAL_OK) {
        fprintf(stderr, "fplab: eval: %s\n", msg);
        return 1;
    }
    if (!isnan(e.ckpt_val_loss))
        fprintf(stderr, "  fp32 val loss %.6f; the run's last validation loss %.6f (%s)\n", base.loss, e.ckpt_val_loss,
                base.loss == e.ckpt_val_loss ? "bitwise the same"
                                             : "the same only with the run's --batch, --batches and --threads");
    static const cli_col cols[] = {
        {"policy", CLI_STR}, {"site", CLI_STR}, {"val_loss", CLI_NUM}, {"delta", CLI_NUM},
        {"delta_se", CLI_NUM}, {"tokens", CLI_INT}};
    rows r = {.out = out, .e = &e, .f = stdout, .progress = show};
    fio_out fo;
    if (out_path) {
        CLI_CHECK(fio_create(&fo, out_path, msg, sizeof msg) == FIO_OK, "eval: --out: %s", msg);
        r.f = fo.f;
    }
    cli_table_init(&r.t, cols, (int)(sizeof cols / sizeof cols[0]));
    snprintf(list, sizeof list, "%s", policies);
    for (char *save = NULL, *n = strtok_r(list, ",", &save); n; n = strtok_r(NULL, ",", &save))
        eval_policy(&r, n, per_site, tel);
    if (out != CLI_OUT_JSON) cli_table_print(&r.t, out, r.f);
    eval_close(&e);
    if (out_path) CLI_CHECK(fio_commit(&fo, msg, sizeof msg) == FIO_OK, "eval: --out: %s", msg);
    return 0;
}
