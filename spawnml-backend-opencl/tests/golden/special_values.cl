inline float sp_round_f16(float x) {
    ushort h;
    vstore_half_rte(x, 0, (__private half *)&h);
    return vload_half(0, (__private const half *)&h);
}
__kernel void k_special_values(__global half *restrict out, __global const long *restrict in_x) {
    int gid = (int)get_global_id(0);
    if ((uint)gid >= 8u) return;
    float v_v = 0.0f;
    v_v = ((float)(in_x[gid]));
    if (isnan(v_v)) {
        vstore_half_rte(INFINITY, gid, out);
        return;
    }
    vstore_half_rte(sp_round_f16((v_v < 0.0f ? (-INFINITY) : (v_v == 0.0f ? NAN : v_v))), gid, out);
    return;
}
