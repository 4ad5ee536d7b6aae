__kernel void k_sum_rows(__global float *restrict out, __global const float *restrict in_x) {
    int gid = (int)get_global_id(0);
    if ((uint)gid >= 4u) return;
    int o0 = 0;
    int v_r = 0;
    float v_acc = 0.0f;
    int v_k = 0;
    o0 = gid;
    v_r = o0;
    v_acc = 0.0f;
    for (v_k = 0; v_k < 5; v_k += 1) {
        v_acc = v_acc + in_x[v_r * 5 + v_k];
    }
    out[gid] = v_acc;
    return;
}
