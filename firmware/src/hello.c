#include "pmsis.h"
static void cl_entry(void *arg) { printf("[cl %d] hello\n", (int) pi_core_id()); }
static void cl_master(void *arg) { pi_cl_team_fork(8, cl_entry, arg); }
static void app(void)
{
    printf("hello from FC\n");
    struct pi_device cl; struct pi_cluster_conf conf;
    pi_cluster_conf_init(&conf); conf.id = 0;
    pi_open_from_conf(&cl, &conf);
    if (pi_cluster_open(&cl)) { printf("cluster open failed\n"); pmsis_exit(1); }
    struct pi_cluster_task t;
    pi_cluster_send_task_to_cl(&cl, pi_cluster_task(&t, cl_master, NULL));
    pi_cluster_close(&cl);
    pmsis_exit(0);
}
int main(void) { return pmsis_kickoff((void *) app); }
