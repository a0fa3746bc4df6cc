/* report.h — `ctrain report A.json B.json ...` (report.c). */
#ifndef CTRAIN_TRAIN_REPORT_H
#define CTRAIN_TRAIN_REPORT_H

int cmd_report(int argc, char **argv);

#endif
