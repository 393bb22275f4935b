// cmd_ablate.c: `fplab ablate`: runs a grid of precision policies x seeds, each run a child
// `fplab train` (experiments/ablate.h), then writes the report (experiments/report.h).
// Progress lines go to stderr; nothing goes to stdout but --help.
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "experiments/ablate.h"
#include "experiments/report.h"
#include "trainer/dist.h"
#include "trainer/train.h"
#include "util/fileio.h"

enum { MAX_PRESETS = 256, MAX_EXTRA = 256 };

static void help(FILE *fp, const train_opts *t) {
    fprintf(fp,
            "usage: fplab ablate --presets LIST --data FILE --out DIR [--seeds N] [--model NAME]\n"
            "                    [--steps S] [--jobs J] [--eval-every N] [--threads T] [--ckpt-every C]\n"
            "                    [--extra \"ARGS\"]\n\n"
            "Trains one model per (preset, seed) of the grid with 'fplab train --policy P --seed S', one at a\n"
            "time or J at a time, keeps every run's log, checkpoint and stderr under DIR/runs/P/seed-S/,\n"
            "records the command in DIR/ablate.json and writes DIR/report.md with plots (see 'fplab report').\n"
            "Running the same command again skips the runs whose log reaches the last step, so an\n"
            "interrupted ablation resumes; a run that did not finish resumes from its last checkpoint\n"
            "(--ckpt-every; bit for bit, as 'fplab train --resume') or else starts again from step 0. A\n"
            "failed run is reported (with the end of its stderr) and marked, the others go on.\n\n"
            "options (default in brackets):\n"
            "  --presets LIST    comma-separated policies: preset names (fp32, bf16-amp, fp16-amp, ...)\n"
            "                    or policy files; a file x.policy runs as 'x' (required)\n"
            "  --seeds N         seeds per preset [1]\n"
            "  --seed-base B     the seeds are B .. B+N-1 [1]\n"
            "  --model NAME      train --model [%s]\n"
            "  --data FILE       train --data (required)\n"
            "  --steps S         train --steps [%ld]\n"
            "  --out DIR         the ablation directory (required)\n"
            "  --jobs J          runs at a time [1]\n"
            "  --eval-every N    train --eval-every [the trainer's, %ld]\n"
            "  --threads T       train --threads per run [with --jobs 1: the trainer's default;\n"
            "                    with J > 1: the processors available divided by J]\n"
            "  --telemetry T     train --telemetry: off, sites or layers [sites]\n"
            "  --ckpt-every C    train --ckpt-every: a checkpoint every C steps, from which a run cut short\n"
            "                    (a session's end, a job's time limit) resumes [0: only at the end]\n"
            "  --extra \"ARGS\"    further train options for every run, e.g. \"--batch 8 --lr 3e-4\"\n"
            "                    (quotes group; not the options above, which ablate sets). Every run\n"
            "                    gets --reproducible 1 (one order of summation on every CPU) unless\n"
            "                    ARGS set --reproducible\n"
            "  --dry-run         print the train commands of the runs still to do and stop\n"
            "  --shard i/n       run only runs i, i+n, i+2n, ... of the grid (seed-major), e.g. one task of a\n"
            "                    job array; shards share OUT, and `fplab report OUT` merges them. Under\n"
            "                    mpirun/srun rank i of n takes shard i/n unless --shard is given\n"
            "  --ptq LIST        post-training quantization: each finished run's checkpoint evaluated\n"
            "                    under fp32 and these inference policies (fplab eval; w8a8-fp8,\n"
            "                    w4-mxfp4, ...) into its ptq.jsonl, and the report's table of them\n"
            "  --no-report       do not write the report at the end\n"
            "  --gnuplot CMD     gnuplot program for the report's plots [gnuplot]\n"
            "  --no-plots        write the report's plot data and scripts but do not run gnuplot\n"
            "  -h, --help        this text\n\n"
            "exit status: 0 all runs done, 1 some run (or post-training evaluation) failed or the report\n"
            "could not be written, 2 bad input.\n\n"
            "examples:\n"
            "  # 2 policies x 1 seed, 100 steps of the tiny model: a few seconds on 2 cores\n"
            "  build/fplab ablate --presets fp32,bf16-amp --model tiny --steps 100 --eval-every 50 \\\n"
            "      --data data/tinyshakespeare.txt --out runs/abl-tiny\n"
            "  build/fplab ablate --presets fp32,bf16-amp --model tiny --steps 100 --eval-every 50 \\\n"
            "      --data data/tinyshakespeare.txt --out runs/abl-tiny --dry-run   # after the above: nothing left to do\n"
            "  # 4 policies x 3 seeds, 500 steps, 2 runs at a time: about 10 seconds on 2 cores\n"
            "  build/fplab ablate --presets fp32,bf16-amp,fp16-amp,pure-bf16 --seeds 3 --model tiny --steps 500 \\\n"
            "      --eval-every 100 --data data/tinyshakespeare.txt --out runs/abl-grid --jobs 2\n"
            "  # the same grid, each trained model then quantized for inference (a table in the report)\n"
            "  build/fplab ablate --presets fp32,bf16-amp,fp16-amp,pure-bf16 --seeds 3 --model tiny --steps 500 \\\n"
            "      --eval-every 100 --data data/tinyshakespeare.txt --out runs/abl-grid --jobs 2 --ptq w8a8-fp8,w4-mxfp4\n",
            t->model, t->steps, t->eval_every);
}

static int split_list(char *s, const char **out, int cap) {
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        char *e = tok + strlen(tok);
        while (e > tok && e[-1] == ' ') *--e = 0;
        CLI_CHECK(*tok, "--presets: empty name in the list");
        CLI_CHECK(n < cap, "--presets: more than %d presets", cap);
        out[n++] = tok;
    }
    return n;
}

static int processors(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cmd_ablate(int argc, char **argv) {
    static const struct option lo[] = {
        {"presets", required_argument, 0, 'p'},    {"seeds", required_argument, 0, 'n'},
        {"seed-base", required_argument, 0, 'b'},  {"model", required_argument, 0, 'm'},
        {"data", required_argument, 0, 'd'},       {"steps", required_argument, 0, 's'},
        {"out", required_argument, 0, 'o'},        {"jobs", required_argument, 0, 'j'},
        {"eval-every", required_argument, 0, 'e'}, {"threads", required_argument, 0, 't'},
        {"telemetry", required_argument, 0, 'T'},  {"extra", required_argument, 0, 'x'},
        {"dry-run", no_argument, 0, 'D'},          {"no-report", no_argument, 0, 'R'},
        {"gnuplot", required_argument, 0, 'g'},    {"no-plots", no_argument, 0, 'P'},
        {"shard", required_argument, 0, 'S'},      {"ptq", required_argument, 0, 'Q'},
        {"ckpt-every", required_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    // The command as typed, for ablate.json (getopt permutes argv).
    const char *cmdv[argc + 1];
    cmdv[0] = "fplab";
    for (int i = 0; i < argc; i++) cmdv[i + 1] = argv[i];
    argv[0] = "fplab ablate";

    train_opts t;
    train_opts_default(&t);
    static const char *presets[MAX_PRESETS];
    char *extra[MAX_EXTRA], *extra_store = NULL, *preset_store = NULL, msg[1024];
    ablate_opts o = {.presets = presets, .nseeds = 1, .seed_base = 1, .model = t.model, .steps = t.steps,
                     .jobs = 1, .eval_every = -1, .telemetry = "sites", .argv = cmdv, .argc = argc + 1,
                     .progress = stderr, .check_train = true};
    bool report = true, plots = true;
    const char *gnuplot = "gnuplot";
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'p':  // split a copy: argv's strings are also the command recorded in ablate.json
            free(preset_store);
            CLI_CHECK(preset_store = strdup(optarg), "ablate: out of memory");
            o.npresets = split_list(preset_store, presets, MAX_PRESETS);
            break;
        case 'n': o.nseeds = (int)cli_parse_long(optarg, "--seeds", 1, 100000); break;
        case 'b': o.seed_base = cli_parse_u64(optarg, "--seed-base"); break;
        case 'm': o.model = optarg; break;
        case 'd': o.data = optarg; break;
        case 's': o.steps = cli_parse_long(optarg, "--steps", 1, 1000000000L); break;
        case 'o': o.out = optarg; break;
        case 'j': o.jobs = (int)cli_parse_long(optarg, "--jobs", 1, 1024); break;
        case 'e': o.eval_every = cli_parse_long(optarg, "--eval-every", 0, 1000000000L); break;
        case 't': o.threads = (int)cli_parse_long(optarg, "--threads", 0, 4096); break;
        case 'C': o.ckpt_every = cli_parse_long(optarg, "--ckpt-every", 0, 1000000000L); break;
        case 'T':
            CLI_CHECK(!strcmp(optarg, "off") || !strcmp(optarg, "sites") || !strcmp(optarg, "layers"),
                      "--telemetry '%s': expected off, sites or layers", optarg);
            o.telemetry = optarg;
            break;
        case 'x':
            free(extra_store);
            o.nextra = ablate_split_args(optarg, extra, MAX_EXTRA, &extra_store, msg, sizeof msg);
            CLI_CHECK(o.nextra >= 0, "%s", msg);
            o.extra = (const char *const *)extra;
            break;
        case 'D': o.dry_run = true; break;
        case 'Q': o.ptq = optarg; break;
        case 'R': report = false; break;
        case 'g': gnuplot = optarg; break;
        case 'P': plots = false; break;
        case 'S':
            CLI_CHECK(sscanf(optarg, "%d/%d", &o.shard, &o.nshards) == 2 && o.nshards >= 1 && o.shard >= 0 &&
                          o.shard < o.nshards, "--shard '%s': expected i/n with 0 <= i < n (e.g. 0/4)", optarg);
            break;
        case 'h': help(stdout, &t); return 0;
        default: cli_usage_error("ablate");
        }
    }
    CLI_CHECK(optind == argc, "ablate: unexpected argument '%s' (options take the form --name value)", argv[optind]);
    CLI_CHECK(o.npresets > 0, "ablate: --presets LIST is required (e.g. --presets fp32,bf16-amp; see 'fplab ablate --help')");
    CLI_CHECK(o.data, "ablate: --data FILE is required (see 'fplab ablate --help')");
    CLI_CHECK(o.out, "ablate: --out DIR is required (see 'fplab ablate --help')");
    CLI_CHECK(access(o.data, R_OK) == 0 || strchr(o.data, ','), "ablate: --data '%s': cannot read it: %s", o.data,
              strerror(errno));
    if (o.threads == 0 && o.jobs > 1) {
        const int p = processors();
        o.threads = p / o.jobs > 1 ? p / o.jobs : 1;
    }
    // Under mpirun (or srun), rank i of n takes shard i/n, and the runs it starts must not believe
    // they are ranks of this job.
    int rank, size;
    if (dist_launcher(&rank, &size) && o.nshards == 0 && size > 1) o.shard = rank, o.nshards = size;
    dist_launcher_forget();
    int st = ablate_validate(&o, msg, sizeof msg);
    CLI_CHECK(st == XP_OK, "ablate: %s", msg);

    ablate_result res;
    st = ablate_run(&o, &res, msg, sizeof msg);
    free(extra_store);
    free(preset_store);
    if (st != XP_OK) {
        fprintf(stderr, "fplab: ablate: %s\n", msg);
        return st == XP_EINVAL ? CLI_EXIT_USAGE : 1;
    }
    if (o.dry_run) return 0;
    char dur[32];
    fio_fmt_duration(res.seconds, dur, sizeof dur);
    fprintf(stderr, "ablate: %d runs: %d done now, %d done before, %d failed (%s)%s\n", res.total, res.done,
            res.skipped, res.failed, dur, res.ptq_failed ? "; some post-training evaluations failed" : "");
    int rc = res.failed || res.ptq_failed ? 1 : 0;
    if (report && o.nshards > 1) {
        fprintf(stderr, "ablate: shard %d/%d finished; when every shard has: fplab report %s\n", o.shard, o.nshards,
                o.out);
    } else if (report) {
        report_opts ro = {.dir = o.out, .gnuplot = plots ? gnuplot : NULL, .info = stderr};
        report_result rr;
        if (report_write(&ro, &rr, msg, sizeof msg) != XP_OK) {
            fprintf(stderr, "fplab: ablate: the report could not be written: %s\n", msg);
            return 1;
        }
        fprintf(stderr, "report: %s/report.md (%d plots, %d drawn)\n", o.out, rr.plots_written, rr.pngs);
    }
    return rc;
}
