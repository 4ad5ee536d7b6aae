__kernel void k_add_broadcast(__global float *restrict out, __global const float *restrict in_a, __global const float *restrict in_b) {
    int gid = (int)get_global_id(0);
    if ((uint)gid >= 6u) return;
    int o0 = 0;
    int o1 = 0;
    int v_broadcast_offset1_off = 0;
    int v_broadcast_offset2_off = 0;
    o0 = gid / 3;
    o1 = gid % 3;
    v_broadcast_offset1_off = o0 * 3;
    v_broadcast_offset1_off = v_broadcast_offset1_off + o1;
    v_broadcast_offset2_off = o1;
    out[gid] = in_a[v_broadcast_offset1_off] + in_b[v_broadcast_offset2_off];
    return;
}
