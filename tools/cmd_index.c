/* PLACEHOLDER until this command lands (replaced by its implementation). */
#include "commands.h"

#include <stdio.h>

int plait_data_index(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return plait_report(pl_errorf(PL_ERR_UNSUPPORTED, "not built yet"));
}
