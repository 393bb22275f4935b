// cmd_policy.c: `fplab policy`: list the precision-policy presets, print one (to copy and edit
// into a file for `fplab train --policy FILE`), or check a policy file.
#include <stdio.h>
#include <string.h>

#include "autocast/policy.h"
#include "cli.h"

static void help(FILE *fp) {
    fputs("usage: fplab policy --list\n"
          "       fplab policy --show NAME\n"
          "       fplab policy --check NAME|FILE\n\n"
          "A policy maps every cast site of the model (attn.qkv.in, mlp.down.grad, attn.kv (the KV\n"
          "cache), master, ...; --check prints them all) to a format, a scaling recipe and a\n"
          "rounding mode, and sets the loss scaler and the weight update (docs/autocast.md). Copy a\n"
          "preset, edit it, and train with --policy FILE.\n"
          "Give exactly one of --list, --show and --check.\n\n"
          "options (default in brackets):\n"
          "  --list              every preset, one line each: name and description [off]\n"
          "  --show NAME         print a preset's text (fp16-static-S: any positive S) []\n"
          "  --check NAME|FILE   parse and validate a preset or a policy file; print the\n"
          "                      resolved policy, every field explicit []\n"
          "  -h, --help          this text\n\n"
          "examples:\n"
          "  build/fplab policy --list\n"
          "  build/fplab policy --show mxfp8\n"
          "  build/fplab policy --check nvfp4\n"
          "  d=$(mktemp -d)\n"
          "  build/fplab policy --show fp8-delayed > $d/my.policy   # edit it, then:\n"
          "  build/fplab policy --check $d/my.policy\n"
          "  # then: build/fplab train --data data/tinyshakespeare.txt --policy $d/my.policy\n",
          fp);
}

// --list: "NAME  description", names padded to the longest.
static void list_presets(void) {
    const char *names = ac_preset_names();
    int width = 0;
    for (const char *s = names; *s;) {
        const int len = (int)strcspn(s, ",");
        if (len > width) width = len;
        s += len + (s[len] == ',');
    }
    for (const char *s = names; *s;) {
        const size_t len = strcspn(s, ",");
        char name[96], desc[256];
        snprintf(name, sizeof name, "%.*s", (int)len, s);
        ac_preset_description(name, desc, sizeof desc);
        printf("%-*s  %s\n", width, name, desc);
        s += len + (s[len] == ',');
    }
}

int cmd_policy(int argc, char **argv) {
    static const struct option longopts[] = {{"list", no_argument, NULL, 'l'},
                                             {"show", required_argument, NULL, 's'},
                                             {"check", required_argument, NULL, 'c'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    const char *show = NULL, *check = NULL;
    bool list = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': list = true; break;
        case 's': show = optarg; break;
        case 'c': check = optarg; break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("policy");
        }
    }
    CLI_CHECK(optind == argc, "policy: unexpected argument '%s'", argv[optind]);
    CLI_CHECK(list + !!show + !!check == 1, "policy: give exactly one of --list, --show NAME, --check NAME|FILE");
    if (list) {
        list_presets();
        return 0;
    }
    char msg[512] = "";
    if (show) {
        const size_t n = ac_preset_text(show, NULL, 0);
        CLI_CHECK(n > 0, "policy: '%s' is not a preset; expected one of %s (or fp16-static-S)", show,
                  ac_preset_names());
        char buf[n + 1];
        ac_preset_text(show, buf, n + 1);
        fputs(buf, stdout);
        return 0;
    }
    ac_policy p;
    CLI_CHECK(ac_policy_load(&p, check, msg, sizeof msg) == AC_OK, "%s", msg);
    if (msg[0]) fprintf(stderr, "fplab: warning: %s\n", msg);
    const size_t n = ac_policy_text(&p, NULL, 0);
    char buf[n + 1];
    ac_policy_text(&p, buf, n + 1);
    fputs(buf, stdout);
    return 0;
}
