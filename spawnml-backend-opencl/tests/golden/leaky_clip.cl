__kernel void k_leaky_clip(__global float *restrict out, __global const float *restrict in_x) {
    int gid = (int)get_global_id(0);
    if ((uint)gid >= 16u) return;
    float v_v = 0.0f;
    float v_y = 0.0f;
    v_v = in_x[gid];
    if (v_v > 6.0f) {
        out[gid] = 6.0f;
        return;
    }
    if (v_v > 0.0f) {
        v_y = v_v;
    } else {
        v_y = v_v * 0.1f;
    }
    out[gid] = v_y;
    return;
}
