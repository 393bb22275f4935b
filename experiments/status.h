// status.h: the status codes of experiments/ (ablate.h, report.h): XP_OK, or the kind of failure
// with a one-line message in the caller's buffer.
#ifndef FPLAB_XP_STATUS_H
#define FPLAB_XP_STATUS_H

enum { XP_OK = 0, XP_EINVAL = 1, XP_EIO = 2, XP_ENOMEM = 3 };

#endif
