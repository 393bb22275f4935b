// cmd_policy.c: `fplab policy`: list the precision-policy presets, print one (to copy and edit
// into a file for `fplab train --policy FILE`), or check a policy file.
#include <stdio.h>
#include <string.h>

#include "autocast/policy.h"
#include "cli.h"

static void help(FILE *fp) {
    fprintf(fp, "usage: fplab policy --list\n"
                "       fplab policy --show NAME          print a preset's text\n"
                "       fplab policy --check NAME|FILE    parse and validate; print the resolved policy\n\n"
                "A policy maps every cast site of the model (attn.qkv.in, mlp.down.grad, master, ...)\n"
                "to a format, a scaling recipe and a rounding mode, and sets the loss scaler and the\n"
                "weight update. Copy a preset, edit it, and train with --policy FILE.\n\n"
                "example:\n"
                "  fplab policy --show fp8-delayed > my.policy   # edit, then:\n"
                "  fplab train --data corpus.txt --policy my.policy\n");
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
        printf("%s\n", ac_preset_names());
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
