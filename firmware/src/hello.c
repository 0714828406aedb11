/* Board check for the GAP8 model / a real AI-deck: FC hello, cluster fork on 8 cores, camera
 * captures (a checksum per frame). `make -C firmware APP_MAIN=hello run platform=gvsoc`. */
#include "pmsis.h"
#include "board.h"

#define W 324
#define H 244

static void cl_entry(void *arg) { printf("[cl %d] hello\n", (int) pi_core_id()); }
static void cl_master(void *arg) { pi_cl_team_fork(8, cl_entry, arg); }

static void app(void)
{
    printf("hello from FC (%u Hz)\n", (unsigned) fw_fc_hz());
    struct pi_device cl;
    struct pi_cluster_conf conf;
    pi_cluster_conf_init(&conf);
    conf.id = 0;
    pi_open_from_conf(&cl, &conf);
    if (pi_cluster_open(&cl)) {
        printf("cluster open failed\n");
        pmsis_exit(1);
    }
    struct pi_cluster_task t;
    pi_cluster_send_task_to_cl(&cl, pi_cluster_task(&t, cl_master, NULL));
    pi_cluster_close(&cl);

    if (fw_cam_open(HELLO_FRAME_DROP)) {
        printf("camera open failed\n");
        pmsis_exit(2);
    }
    fw_timer_start();
    uint8_t *buf = pi_l2_malloc(W * H);
    for (int f = 0; f < 8; f++) {
        memset(buf, 0xEE, W * H);
        fw_cam_start(buf, W * H);
        fw_cam_wait();
        uint32_t sum = 0;
        for (int i = 0; i < W * H; i++)
            sum = sum * 31 + buf[i];
        printf("frame %d: first %u %u %u %u hash %08x capture %u cycles at %u\n", f, buf[0], buf[1], buf[2],
               buf[3], (unsigned) sum, (unsigned) (fw_cam_done_at() - fw_cam_started_at()), (unsigned) fw_cam_done_at());
    }
    pmsis_exit(0);
}

int main(void) { return pmsis_kickoff((void *) app); }
