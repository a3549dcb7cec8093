/* The fixes in the JSON report (see fixes_out.h and REPORT.md). */
#include "reports/write/fixes_out.h"
#include "reports/write/fixes_text.h"

static void parts(ca_json *j, const ca_breakdown *b) {
    ca_json_kv_uint(j, "persistent_bytes", b->persistent);
    ca_json_kv_uint(j, "kept_bytes", b->kept);
    ca_json_kv_uint(j, "activations_bytes", b->activations);
    ca_json_kv_uint(j, "temporaries_bytes", b->temporaries);
    ca_json_kv_uint(j, "kept_after_peak_bytes", b->kept_after_peak);
}

int ca_fixes_json(ca_json *j, const ca_fix_report *r, const char *const *names) {
    ca_json_key(j, "peak_breakdown");
    if (!r->have) {
        ca_json_null(j);
    } else {
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "iteration", r->iteration);
        ca_json_kv_uint(j, "peak_bytes", r->peak);
        parts(j, &r->total);
        ca_json_kv_uint(j, "batch_scaled_bytes", r->scaled_bytes);
        ca_json_kv_uint(j, "weights_estimate_bytes", r->weight_bytes);
        ca_json_kv_uint(j, "fp32_under_autocast_bytes", r->fp32_bytes);
        ca_json_key(j, "roles");
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "weights_bytes", r->weight_bytes);
        ca_json_kv_uint(j, "gradients_bytes", r->roles.gradients);
        ca_json_kv_uint(j, "optimizer_state_bytes", r->roles.optimizer);
        ca_json_kv_uint(j, "made_later_bytes", r->roles.later);
        ca_json_kv_uint(j, "leak_left_out_bytes", r->leaked);
        ca_json_kv_str(j, "gradients", r->roles.grads_in_place ? "zeroed in place (in optimizer_state_bytes)"
                                       : !r->roles.gradients ? "not found"
                                       : r->roles.grads_freed ? "freed after the step" : "kept to the next iteration");
        ca_json_kv_str(j, "weights_from", r->roles.from_setup ? "first step's order" : "a quarter of the state");
        ca_json_kv_str(j, "told_apart_by", r->roles.from_frames ? "the step's order; call stacks for units and fp32 ops"
                                                                : "the step's order and sizes");
        ca_json_obj_end(j);
        char lines[CA_FIX_ASSUME_MAX][CA_FIX_LINE];
        size_t n = ca_fixes_assumptions(r, lines, CA_FIX_ASSUME_MAX);
        ca_json_key(j, "assumptions");
        ca_json_arr_begin(j);
        for (size_t i = 0; i < n; i++) ca_json_str(j, lines[i]);
        ca_json_arr_end(j);
        ca_json_key(j, "by_frame");
        ca_json_arr_begin(j);
        for (uint32_t g = 1; g < r->n_groups; g++) {
            const ca_breakdown *b = &r->by_group[g];
            if (!b->persistent && !b->kept && !b->activations && !b->temporaries && !b->kept_after_peak) continue;
            ca_json_obj_begin(j);
            ca_json_kv_str(j, "frame", names && names[g] ? names[g] : "unknown frame");
            parts(j, b);
            ca_json_obj_end(j);
        }
        ca_json_arr_end(j);
        ca_json_obj_end(j);
    }
    ca_json_key(j, "fixes");
    ca_json_arr_begin(j);
    for (size_t i = 0; i < r->n_fix; i++) {
        const ca_fix *f = &r->fix[i];
        ca_json_obj_begin(j);
        ca_json_kv_str(j, "fix", ca_fix_name(f->kinds));
        if (f->kinds & CA_FIX_ACCUM) ca_json_kv_uint(j, "factor", f->factor);
        if (f->kinds & CA_FIX_CHECKPOINT) {
            ca_json_kv_uint(j, "blocks", f->blocks);
            ca_json_kv_str(j, "unit", r->unit_name[0] ? r->unit_name : NULL);
            ca_json_kv_str(j, "blocks_by", r->unit_name[0] ? "frames" : r->blocks_by_sizes ? "sizes" : "call sites");
        }
        ca_json_kv_uint(j, "predicted_peak_bytes", f->predicted);
        ca_json_kv_uint(j, "low_bytes", f->low);
        ca_json_kv_uint(j, "high_bytes", f->high);
        ca_json_key(j, "fits");
        if (f->fits < 0) ca_json_null(j);
        else ca_json_bool(j, f->fits);
        ca_json_obj_end(j);
    }
    ca_json_arr_end(j);
    ca_json_kv_str(j, "fixes_unavailable", r->have ? NULL : r->why);
    ca_json_kv_str(j, "checkpointing_unavailable", r->have && r->checkpoint_why[0] ? r->checkpoint_why : NULL);
    ca_json_key(j, "fits_on_device");
    if (!r->have || !r->capacity) {
        ca_json_null(j);
    } else {
        ca_json_obj_begin(j);
        ca_json_kv_uint(j, "capacity_bytes", r->capacity);
        ca_json_kv_uint(j, "missing_bytes", r->missing);
        ca_json_kv_double(j, "micro_batch_fraction", r->micro_fraction);
        ca_json_kv_uint(j, "unscaled_peak_bytes", r->unscaled_peak);
        ca_json_key(j, "single_fixes");
        ca_json_arr_begin(j);
        unsigned seen = 0;
        for (size_t i = 0; i < r->n_fix; i++) {
            const ca_fix *f = &r->fix[i];
            if ((f->kinds & (f->kinds - 1)) || f->fits != 1 || (seen & f->kinds)) continue;
            seen |= f->kinds;
            ca_json_str(j, ca_fix_name(f->kinds));
        }
        ca_json_arr_end(j);
        ca_json_obj_end(j);
    }
    return ca_json_error(j) ? -1 : 0;
}
