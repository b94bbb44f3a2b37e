/* Pipelining in `plait train`: the layers and schedule of this rank's stage, and
 * the one interpreter of the stage's actions (parallel/pp/schedule.h) that a
 * pipelined training step runs in place of the micro-batch loop. */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/log.h"

#include <string.h>

/* Micro-batches whose activations stage r holds at once under schedule s: from the
 * first action naming a micro-batch (its activation's receive, or its forward) to
 * the end of its backward (BWD, or BWD_WEIGHT when split). Every schedule here ends
 * those in forward order, so the live micro-batches are consecutive. */
static int64_t activations_alive(const pl_pp_schedule *s, int r, int chunk)
{
    int na;
    const pl_pp_action *list = pl_pp_schedule_list(s, r, &na);
    int64_t live = 0, most = 1;
    int started = -1; /* the last micro-batch whose life has begun */
    for (int i = 0; i < na; i++) {
        const pl_pp_action *a = &list[i];
        if (a->chunk != chunk)
            continue;
        if ((a->op == PL_PP_RECV_ACT || a->op == PL_PP_FWD) && a->mb > started) {
            started = a->mb;
            if (++live > most)
                most = live;
        } else if (a->op == PL_PP_BWD || a->op == PL_PP_BWD_WEIGHT) {
            live--;
        }
    }
    return most;
}

/* Chunk k's stage: its layers, whether it holds the embedding or the head, its
 * slots, and (ZB-H1) the split backward. */
static pl_status chunk_stage(pl_trainer *t, int k, pl_model_stage *stage)
{
    pl_status st = PL_OK;
    const int P = t->grid.layout.pp, r = t->grid.pp_rank, v = t->nchunks;
    int64_t l0, nl;
    const pl_model_config *c = &t->cfg;
    pl_model_config part[2];
    int s0 = 0, ns = P; /* a pipelined t5 or bart: the stages of this stage's stack */
    if (pl_model_is_encdec(c) && c->pp_split > 0) {
        pl_model_encdec_parts(c, &part[0], &part[1]);
        c = &part[pl_model_encdec_stage_stack(c, P, r, &s0, &ns)];
    }
    PL_TRY(pl_model_chunk_layers(c, P, r, k, &l0, &nl));
    *stage = (pl_model_stage){l0, nl, r == s0 && k == 0, r == s0 + ns - 1 && k == v - 1, 1, 0};
    if (P > 1) {
        stage->inflight = activations_alive(&t->pp, r, k);
        stage->split_bwd = t->pp.spec.kind == PL_PP_ZB_H1;
    }
fail:
    return st;
}

/* The layers of this rank's pipeline stage (its first model chunk) and, pipelined,
 * the schedule (its in-flight bounds size the activation slots). This version runs
 * 1F1B, GPipe, ZB-H1 (each backward in its input and weight halves) and interleaved
 * 1F1B (model chunks), each with any ZeRO stage; the others are refused by name. */
pl_status pl_train_setup_pipeline(pl_trainer *t, pl_model_stage *stage)
{
    pl_status st = PL_OK;
    const int P = t->grid.layout.pp;
    const int v = t->cfg.pp_chunks > 1 ? (int)t->cfg.pp_chunks : 1;
    t->nchunks = v;
    if (P == 1)
        return chunk_stage(t, 0, stage);
    pl_pp_kind kind = pl_pp_kind_default(P, v);
    if (t->a->pipeline_schedule)
        PL_TRY(pl_pp_kind_parse(t->a->pipeline_schedule, &kind));
    if (kind == PL_PP_INTERLEAVED && v == 1)
        return pl_errorf(PL_ERR_ARG, "--pipeline-schedule interleaved needs model chunks: "
                         "--num-layers-per-virtual-pipeline-stage or "
                         "--num-virtual-stages-per-pipeline-rank");
    if (v > 1 && kind != PL_PP_INTERLEAVED)
        return pl_errorf(PL_ERR_ARG, "--pipeline-schedule %s with %d model chunks per rank: "
                         "chunks run under the interleaved schedule", pl_pp_kind_name(kind), v);
    if (kind != PL_PP_1F1B && kind != PL_PP_GPIPE && kind != PL_PP_ZB_H1 &&
        kind != PL_PP_INTERLEAVED)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--pipeline-schedule %s: this version runs 1f1b, "
                         "gpipe, zb-h1 and interleaved", pl_pp_kind_name(kind));
    if (pl_model_is_encdec(&t->cfg) && kind == PL_PP_INTERLEAVED)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--pipeline-schedule %s with --model %s: an "
                         "encoder-decoder pipeline runs 1f1b, gpipe and zb-h1 (no model chunks)",
                         pl_pp_kind_name(kind), t->a->model);
    const pl_pp_spec spec = {kind, P, (int)t->num_micro, v};
    PL_TRY(pl_pp_schedule_init(&t->pp, &spec));
    PL_TRY(pl_pp_schedule_check(&t->pp, NULL, NULL)); /* every stage's list, before it runs */
    PL_TRY(chunk_stage(t, 0, stage));
    t->pp_slots = 1;
    for (int k = 0; k < v; k++) {
        const int64_t n = activations_alive(&t->pp, t->grid.pp_rank, k);
        if (n > t->pp_slots)
            t->pp_slots = n;
    }
    t->pp_tied = !t->cfg.untie && t->cfg.head.lm_head; /* fine-tuning heads: no output layer */
    const size_t nreq = 2 * (size_t)(v * t->pp_slots); /* up to 2 tensors a transfer */
    t->pp_send_act = pl_calloc(nreq, sizeof *t->pp_send_act);
    t->pp_send_grad = pl_calloc(nreq, sizeof *t->pp_send_grad);
    t->pp_dp_wire = pl_calloc(3 * (size_t)P, sizeof *t->pp_dp_wire);
    if (!t->pp_send_act || !t->pp_send_grad || !t->pp_dp_wire)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < nreq; k++)
        t->pp_send_act[k] = t->pp_send_grad[k] = PL_COMM_REQ_NULL;
fail:
    return st;
}

pl_status pl_train_setup_chunks(pl_trainer *t)
{
    pl_status st = PL_OK;
    if (t->nchunks <= 1)
        return PL_OK;
    t->chunk_more = pl_calloc((size_t)(t->nchunks - 1), sizeof *t->chunk_more);
    if (!t->chunk_more)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for the model chunks");
    for (int k = 1; k < t->nchunks; k++) {
        pl_model_stage stage;
        PL_TRY(chunk_stage(t, k, &stage));
        pl_model *m = pl_train_chunk(t, k);
        PL_TRY(pl_model_init(m, &t->cfg, &t->reg, t->params, t->grads, t->mbs, &stage,
                             t->model.tp, t->gemm));
        t->chunks_up = k;
        m->seed = t->model.seed;
        m->blk.tpq = t->model.blk.tpq;
    }
fail:
    return st;
}

void pl_train_free_chunks(pl_trainer *t)
{
    for (int k = 1; k <= t->chunks_up; k++)
        pl_model_free(pl_train_chunk(t, k));
    pl_free(t->chunk_more);
    t->chunk_more = NULL;
    t->chunks_up = 0;
}

/* The slot micro-batch mb's activations use: every schedule here finishes its
 * backwards (with ZB-H1, their weight halves) in forward order, so at most
 * `inflight` consecutive micro-batches are alive (activations_alive) and mb
 * modulo inflight never collides. */
static int64_t pp_slot(const pl_model *m, int mb) { return mb % m->stage.inflight; }

int pl_train_pp_tensors(pl_trainer *t, pl_model *m, int64_t k, pl_pp_op op, float *buf[2],
                        int64_t n[2])
{
    if (t->edpp)
        return pl_train_encdec_pp_tensors(t, m, k, op, buf, n);
    pl_model_mb *mb = &m->mb[k];
    n[0] = m->blk.Nl * m->C;
    switch (op) {
    case PL_PP_RECV_ACT: buf[0] = mb->x0; return !m->stage.first;
    case PL_PP_SEND_ACT: buf[0] = pl_model_output(m); return !m->stage.last;
    case PL_PP_RECV_GRAD: buf[0] = mb->dout; return !m->stage.last;
    case PL_PP_SEND_GRAD: buf[0] = mb->dx0; return !m->stage.first;
    default: return 0;
    }
}

pl_status pl_train_pp_eval_forward(pl_trainer *t, pl_model *m, int tag)
{
    pl_status st = PL_OK;
    pl_comm *pp = pl_grid_comm(&t->grid, PL_GRID_PP);
    const int P = t->grid.layout.pp, r = t->grid.pp_rank;
    float *buf[2];
    int64_t n[2];
    int nt = pl_train_pp_tensors(t, m, 0, PL_PP_RECV_ACT, buf, n);
    for (int j = 0; j < nt; j++)
        PL_TRY(pl_comm_recv_f32(pp, buf[j], n[j], (r + P - 1) % P, tag));
    PL_TRY(pl_train_forward(t, m));
    nt = pl_train_pp_tensors(t, m, 0, PL_PP_SEND_ACT, buf, n);
    for (int j = 0; j < nt; j++) /* (chunk c of the last rank feeds chunk c + 1 of the first) */
        PL_TRY(pl_comm_send_f32(pp, buf[j], n[j], (r + 1) % P, r == P - 1 ? tag + 1 : tag));
fail:
    return st;
}

/* The tied word embeddings of the first stage and the output layer of the last
 * hold one tensor: their gradients are summed over the embedding group
 * (Megatron's _allreduce_word_embedding_grads), so both copies take the same step.
 * A pipelined t5 or bart: its groups (encdec_pipe.c). */
static pl_status pp_tied_grads(pl_trainer *t)
{
    if (t->edpp)
        return pl_train_encdec_pp_tied_grads(t);
    const pl_model *head = pl_train_head(t);
    if (!t->pp_tied || !(t->model.stage.first || head->stage.last))
        return PL_OK;
    float *g = t->model.stage.first ? t->model.d.wte : head->d.out_w;
    return pl_comm_allreduce_f32(pl_grid_comm(&t->grid, PL_GRID_EMBD), g,
                                 t->model.Vl * t->model.C, PL_COMM_SUM);
}

/* The seconds since t0 to computation op's account (plait bench's simulation). */
static void op_time(pl_trainer *t, pl_pp_op op, double t0)
{
    t->prof.pp_op[op] += pl_time_now() - t0;
    t->prof.pp_op_n[op]++;
}

pl_status pl_train_pp_simulate(pl_trainer *t)
{
    pl_status st = PL_OK;
    const int P = t->grid.layout.pp, r = t->grid.pp_rank;
    double *cost = pl_calloc((size_t)(4 * P + P), sizeof *cost), *idle = cost + 4 * P;
    if (!cost)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < 4; k++) /* this stage's means; the other stages' slots stay 0 */
        cost[r * 4 + k] = t->prof.pp_op_n[k] ? t->prof.pp_op[k] / (double)t->prof.pp_op_n[k] : 0;
    PL_TRY(pl_comm_allreduce_f64(pl_grid_comm(&t->grid, PL_GRID_PP), cost, 4 * P, PL_COMM_SUM));
    double makespan;
    PL_TRY(pl_pp_schedule_simulate(&t->pp, cost, &makespan, idle));
    t->pp_sim_idle = makespan > 0 ? idle[0] / makespan : 0;
fail:
    pl_free(cost);
    return st;
}

/* One step's forwards and backwards as this stage's schedule lists them, with
 * the activations and gradients exchanged with the neighbouring stages. Every
 * stage loads every micro-batch (the first needs its tokens, the last its
 * targets, all of them its samples' dropout keys). loss_sum: the last stage's
 * mean loss over the step's micro-batches (0 elsewhere). ZeRO stage 0: the DP
 * buckets of a layer are ready when its last micro-batch's backward ends; the
 * embeddings and the final norm's region (with a tied output layer) after the
 * embedding group's sum. Stage 1: one reduce-scatter after the step (the caller's).
 * Stages 2-3 (zero_hooks.c): each layer's gradients reduce-scattered at the end of
 * every micro-batch's backward through it, as without pipelining; the embeddings'
 * and the final norm's accumulate over the step and are reduce-scattered once, after
 * the embedding group's sum (the tied copies' shards do not align: each stage pads
 * and partitions its own flat buffer). */
pl_status pl_train_run_pipeline(pl_trainer *t, pl_sampler *sampler, double scale, double ls,
                              double loss_sum[2])
{
    pl_status st = PL_OK;
    pl_comm *pp = pl_grid_comm(&t->grid, PL_GRID_PP);
    const int r = t->grid.pp_rank, M = (int)t->num_micro;
    int na;
    const pl_pp_action *list = pl_pp_schedule_list(&t->pp, r, &na);
    int loaded = 0;
    loss_sum[0] = loss_sum[1] = 0;
    t->pp_wait_step = t->pp_compute_step = 0;
    for (int i = 0; i < na; i++) {
        const pl_pp_action *a = &list[i];
        pl_model *m = pl_train_chunk(t, a->chunk);
        const int64_t k = pp_slot(m, a->mb), req_k = 2 * (a->chunk * t->pp_slots + k);
        const int tag = pl_pp_transfer_id(&t->pp.spec, r, a);
        /* a transfer's tensors (two between t5's or bart's decoder stages), posted in
         * the same order on both sides: MPI matches them in order */
        float *buf[2];
        int64_t n[2];
        pl_comm_req req;
        double t0 = pl_time_now();
        switch (a->op) {
        case PL_PP_RECV_ACT:
        case PL_PP_RECV_GRAD: {
            /* the slot's last sends have left (a decoder stage sends what it received) */
            pl_comm_req *sent = a->op == PL_PP_RECV_ACT ? t->pp_send_act : t->pp_send_grad;
            PL_TRY(pl_comm_wait(&sent[req_k]));
            PL_TRY(pl_comm_wait(&sent[req_k + 1]));
            const int nt = pl_train_pp_tensors(t, m, k, a->op, buf, n);
            for (int j = 0; j < nt; j++) {
                PL_TRY(pl_comm_irecv_f32(pp, buf[j], n[j], a->peer, tag, &req));
                PL_TRY(pl_comm_wait(&req));
            }
            t->pp_wait_step += pl_time_now() - t0;
            break;
        }
        case PL_PP_SEND_ACT:
        case PL_PP_SEND_GRAD: {
            pl_comm_req *sent = a->op == PL_PP_SEND_ACT ? t->pp_send_act : t->pp_send_grad;
            pl_model_use(m, k);
            const int nt = pl_train_pp_tensors(t, m, k, a->op, buf, n);
            for (int j = 0; j < nt; j++)
                PL_TRY(pl_comm_isend_f32(pp, buf[j], n[j], a->peer, tag, &sent[req_k + j]));
            break;
        }
        case PL_PP_FWD: {
            PL_TRY(pl_comm_wait(&t->pp_send_act[req_k])); /* the slot's last output has left */
            PL_TRY(pl_comm_wait(&t->pp_send_act[req_k + 1]));
            pl_model_use(m, k);
            if (a->chunk > 0) { /* chunk 0's slot holds the batch until its backward, the last */
                pl_model_use(&t->model, pp_slot(&t->model, a->mb));
                pl_train_copy_batch(&t->model, m);
            } else {
                if (a->mb != loaded)
                    return pl_errorf(PL_ERR_INTERNAL, "pipeline stage %d: forward of micro-batch "
                                     "%d out of order (next to load: %d)", r, a->mb, loaded);
                if (!pl_sampler_next(sampler, t->batch_idx))
                    return pl_errorf(PL_ERR_INTERNAL, "the training data ran out at iteration "
                                     "%lld", (long long)t->iteration);
                int64_t n_loss;
                PL_TRY(pl_train_load_micro_batch(t, PL_SPLIT_TRAIN, t->batch_idx, scale * ls,
                                                 &n_loss));
                loaded++;
            }
            double t1 = pl_time_now();
            m->training = 1;
            m->iteration = t->iteration;
            PL_TRY(pl_train_forward(t, m));
            op_time(t, PL_PP_FWD, t1);
            if (pl_train_loss_stage(m)) {
                double mb_loss[2];
                pl_train_micro_batch_losses(m, scale * ls, mb_loss);
                loss_sum[0] += mb_loss[0] * scale, loss_sum[1] += mb_loss[1] * scale;
            }
            t->prof.data += t1 - t0;
            t->prof.compute += pl_time_now() - t1;
            t->pp_compute_step += pl_time_now() - t1;
            break;
        }
        case PL_PP_BWD: {
            PL_TRY(pl_comm_wait(&t->pp_send_grad[req_k])); /* so has its last dx0 */
            PL_TRY(pl_comm_wait(&t->pp_send_grad[req_k + 1]));
            pl_model_use(m, k);
            const int last = a->mb == M - 1;
            const double tc = pl_time_now();
            if (t->edpp) /* t5, bart: the encoder output's gradient */
                pl_train_encdec_pp_backward_begin(t, m);
            if (t->zero_stage >= 2)
                PL_TRY(pl_train_zero_pp_backward(t, m));
            else
                PL_TRY(pl_model_backward(m, last && t->zero_stage == 0 ? pl_train_grad_ready : NULL,
                                         t));
            if (t->edpp)
                PL_TRY(pl_train_encdec_pp_backward_end(t, m));
            op_time(t, PL_PP_BWD, tc);
            t->prof.compute += pl_time_now() - t0;
            t->pp_compute_step += pl_time_now() - t0;
            break;
        }
        case PL_PP_BWD_INPUT: { /* what the previous stage waits for; the weights later */
            PL_TRY(pl_comm_wait(&t->pp_send_grad[req_k]));
            PL_TRY(pl_comm_wait(&t->pp_send_grad[req_k + 1]));
            pl_model_use(m, k);
            const double tc = pl_time_now();
            if (t->edpp) /* t5, bart: the encoder output's gradient is an input's */
                pl_train_encdec_pp_backward_begin(t, m);
            PL_TRY(pl_model_backward_input(m));
            if (t->edpp)
                PL_TRY(pl_train_encdec_pp_backward_end(t, m));
            op_time(t, PL_PP_BWD_INPUT, tc);
            t->prof.compute += pl_time_now() - t0;
            t->pp_compute_step += pl_time_now() - t0;
            break;
        }
        case PL_PP_BWD_WEIGHT: {
            pl_model_use(m, k);
            if (t->edpp) /* the cross-attention's weights read the slot's encoder output */
                pl_train_encdec_pp_bind(t, m, k);
            const int last = a->mb == M - 1; /* weight halves run in micro-batch order */
            if (t->zero_stage >= 2)
                PL_TRY(pl_train_zero_pp_backward_weight(t, m));
            else
                PL_TRY(pl_model_backward_weight(m, last && t->zero_stage == 0 ? pl_train_grad_ready
                                                                              : NULL, t));
            op_time(t, PL_PP_BWD_WEIGHT, t0);
            t->prof.compute += pl_time_now() - t0;
            t->pp_compute_step += pl_time_now() - t0;
            break;
        }
        default:
            return pl_errorf(PL_ERR_INTERNAL, "pipeline stage %d: %s is not run by this version",
                             r, pl_pp_op_name(a->op));
        }
    }
    double tw = pl_time_now();
    for (int64_t k = 0; k < 2 * t->nchunks * t->pp_slots; k++) {
        PL_TRY(pl_comm_wait(&t->pp_send_act[k]));
        PL_TRY(pl_comm_wait(&t->pp_send_grad[k]));
    }
    t->pp_wait_step += pl_time_now() - tw;
    t->prof.comm += t->pp_wait_step;
    t->prof.pp_wait += t->pp_wait_step;
    if (t->zero_stage >= 2)
        t->zq_compute_end = tw; /* queued work done by now ran beside compute */
    PL_TRY(pp_tied_grads(t));
    if (t->zero_stage >= 2)
        PL_TRY(pl_train_zero_pp_finish(t));
    if (t->zero_stage == 0) { /* the regions outside the layers are final now */
        if (pl_train_head(t)->stage.last && t->pp_tied && t->lnf_offset >= 0)
            PL_TRY(pl_dp_buckets_ready(t->buckets, t->lnf_offset, t->lnf_count));
        if (t->emb_count > 0) /* the first stage's (t5, bart: any stage's before its layers) */
            PL_TRY(pl_dp_buckets_ready(t->buckets, 0, t->emb_count));
    }
fail:
    return st;
}
