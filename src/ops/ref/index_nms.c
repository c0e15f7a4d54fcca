/*
 * Reference kernel: NonMaxSuppression (index family).
 *
 * Per batch and class, boxes whose score passes score_threshold are taken
 * in descending score order (ties: lower box index first); a box is kept
 * unless its IoU with an already kept box exceeds iou_threshold, until
 * max_output_boxes_per_class are kept. Box geometry is computed in float,
 * as the ONNX reference does.
 */
#include <stdlib.h>

#include "ops/ref/index_util.h"

typedef struct nms_cand {
    float score;
    int64_t box;
} nms_cand;

static int nms_cand_cmp(const void *pa, const void *pb)
{
    const nms_cand *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->box < b->box ? -1 : (a->box > b->box ? 1 : 0);
}

/* A box as (ymin, xmin, ymax, xmax). */
typedef struct nms_box {
    float y1, x1, y2, x2;
} nms_box;

static nms_box nms_box_read(const mcp_tensor *boxes, int64_t off, bool center)
{
    float a = (float)mcp_tensor_get_f64(boxes, off + 0);
    float b = (float)mcp_tensor_get_f64(boxes, off + 1);
    float c = (float)mcp_tensor_get_f64(boxes, off + 2);
    float d = (float)mcp_tensor_get_f64(boxes, off + 3);
    nms_box r;
    if (center) {
        /* [x_center, y_center, width, height] */
        r.x1 = a - c / 2.0f;
        r.x2 = a + c / 2.0f;
        r.y1 = b - d / 2.0f;
        r.y2 = b + d / 2.0f;
    } else {
        /* [y1, x1, y2, x2], either diagonal */
        r.y1 = a < c ? a : c;
        r.y2 = a < c ? c : a;
        r.x1 = b < d ? b : d;
        r.x2 = b < d ? d : b;
    }
    return r;
}

static bool nms_suppresses(const nms_box *p, const nms_box *q, float iou_threshold)
{
    float ix1 = p->x1 > q->x1 ? p->x1 : q->x1;
    float iy1 = p->y1 > q->y1 ? p->y1 : q->y1;
    float ix2 = p->x2 < q->x2 ? p->x2 : q->x2;
    float iy2 = p->y2 < q->y2 ? p->y2 : q->y2;
    if (ix2 <= ix1 || iy2 <= iy1) return false;
    float inter = (ix2 - ix1) * (iy2 - iy1);
    float area_p = (p->x2 - p->x1) * (p->y2 - p->y1);
    float area_q = (q->x2 - q->x1) * (q->y2 - q->y1);
    float uni = area_p + area_q - inter;
    if (area_p <= 0.0f || area_q <= 0.0f || uni <= 0.0f) return false;
    return inter / uni > iou_threshold;
}

/* Reads an optional scalar (or one-element) input as double. */
static mcp_status nms_scalar(mcp_kernel_ctx *ctx, int i, const char *name, bool *present,
                             double *value)
{
    const mcp_tensor *t = mcp_kin(ctx, i);
    *present = false;
    if (!t) return MCP_STATUS_OK;
    int64_t n = mcp_tensor_numel(t);
    if (n == 0) return MCP_STATUS_OK;
    if (n != 1 || !mcp_dtype_is_numeric(t->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be a numeric scalar", name);
    *present = true;
    *value = t->dtype == MCP_DTYPE_INT64 ? (double)((const int64_t *)t->data)[0]
                                         : mcp_tensor_get_f64(t, 0);
    return MCP_STATUS_OK;
}

mcp_status mcp__ref_index_nms_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *boxes = mcp_kin(ctx, 0);
    const mcp_tensor *scores = mcp_kin(ctx, 1);
    if (!boxes || !scores)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'boxes' and 'scores' are required");
    if (boxes->rank != 3 || boxes->dims[2] != 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'boxes' must have shape [batches, boxes, 4]");
    if (scores->rank != 3 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        return mcp_kfail(
            ctx, MCP_STATUS_INVALID_ARGUMENT,
            "input 'scores' must have shape [batches, classes, boxes] matching 'boxes'");
    if (!mcp_dtype_is_float(boxes->dtype) || !mcp_dtype_is_float(scores->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'boxes' and 'scores' must be floating point");
    bool has_max, has_iou, has_score;
    double max_d = 0, iou_d = 0, score_d = 0;
    mcp_status st = nms_scalar(ctx, 2, "max_output_boxes_per_class", &has_max, &max_d);
    if (st == MCP_STATUS_OK) st = nms_scalar(ctx, 3, "iou_threshold", &has_iou, &iou_d);
    if (st == MCP_STATUS_OK) st = nms_scalar(ctx, 4, "score_threshold", &has_score, &score_d);
    if (st != MCP_STATUS_OK) return st;
    if (has_iou && (iou_d < 0.0 || iou_d > 1.0))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'iou_threshold' must be in [0, 1]");
    int64_t max_per_class = has_max && max_d > 0 ? (int64_t)max_d : 0;
    float iou_threshold = (float)iou_d;
    float score_threshold = (float)score_d;
    int64_t center = mcp_kattr_int(ctx, "center_point_box", 0);
    if (center != 0 && center != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'center_point_box' must be 0 or 1");

    int64_t nb = boxes->dims[0], nbox = boxes->dims[1], ncls = scores->dims[1];
    size_t cap = nbox > 0 ? (size_t)nbox : 1;
    nms_cand *cand = mcp_malloc(cap * sizeof(*cand));
    nms_box *kept = mcp_malloc(cap * sizeof(*kept));
    /* Selected triples, grown as needed. */
    int64_t *sel = NULL;
    int64_t n_sel = 0, sel_cap = 0;
    if (!cand || !kept) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %lld boxes",
                       (long long)nbox);
        goto done;
    }
    for (int64_t b = 0; b < nb && max_per_class > 0; b++) {
        for (int64_t c = 0; c < ncls; c++) {
            int64_t nc = 0;
            for (int64_t i = 0; i < nbox; i++) {
                float s = (float)mcp_tensor_get_f64(scores, (b * ncls + c) * nbox + i);
                if (has_score && !(s > score_threshold)) continue;
                cand[nc].score = s;
                cand[nc].box = i;
                nc++;
            }
            qsort(cand, (size_t)nc, sizeof(*cand), nms_cand_cmp);
            int64_t nk = 0;
            for (int64_t j = 0; j < nc && nk < max_per_class; j++) {
                nms_box bx = nms_box_read(boxes, (b * nbox + cand[j].box) * 4, center == 1);
                bool drop = false;
                for (int64_t k = 0; k < nk && !drop; k++)
                    drop = nms_suppresses(&kept[k], &bx, iou_threshold);
                if (drop) continue;
                kept[nk++] = bx;
                if (n_sel == sel_cap) {
                    int64_t ncap = sel_cap ? sel_cap * 2 : 64;
                    int64_t *ns = mcp_realloc(sel, (size_t)ncap * 3 * sizeof(int64_t));
                    if (!ns) {
                        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY,
                                       "out of memory for selections");
                        goto done;
                    }
                    sel = ns;
                    sel_cap = ncap;
                }
                sel[n_sel * 3 + 0] = b;
                sel[n_sel * 3 + 1] = c;
                sel[n_sel * 3 + 2] = cand[j].box;
                n_sel++;
            }
        }
    }
    int64_t dims[2] = {n_sel, 3};
    mcp_tensor *out = mcp_kout(ctx, 0, MCP_DTYPE_INT64, 2, dims);
    if (!out) {
        st = MCP_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    for (int64_t i = 0; i < n_sel * 3; i++) ((int64_t *)out->data)[i] = sel[i];
done:
    mcp_free(cand);
    mcp_free(kept);
    mcp_free(sel);
    return st;
}
