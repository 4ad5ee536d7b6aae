int sp_floormod_i32(int p_a, int p_b) {
    bool v_truncmod_signed1_ok = false;
    int v_truncmod_signed1_r = 0;
    int v_r = 0;
    v_truncmod_signed1_ok = p_b != 0 && p_b != -1;
    v_truncmod_signed1_r = p_a % (v_truncmod_signed1_ok ? p_b : 1);
    v_r = (v_truncmod_signed1_ok ? v_truncmod_signed1_r : 0);
    return (v_r != 0 && v_r < 0 != p_b < 0 ? v_r + p_b : v_r);
}
int sp_floordiv_i32(int p_a, int p_b) {
    bool v_truncdiv_signed1_ok = false;
    int v_truncdiv_signed1_q = 0;
    int v_q = 0;
    bool v_truncmod_signed2_ok = false;
    int v_truncmod_signed2_r = 0;
    int v_r = 0;
    v_truncdiv_signed1_ok = p_b != 0 && p_b != -1;
    v_truncdiv_signed1_q = p_a / (v_truncdiv_signed1_ok ? p_b : 1);
    v_q = (v_truncdiv_signed1_ok ? v_truncdiv_signed1_q : (p_b == -1 ? 0 - p_a : 0));
    v_truncmod_signed2_ok = p_b != 0 && p_b != -1;
    v_truncmod_signed2_r = p_a % (v_truncmod_signed2_ok ? p_b : 1);
    v_r = (v_truncmod_signed2_ok ? v_truncmod_signed2_r : 0);
    return (v_r != 0 && v_r < 0 != p_b < 0 ? v_q - 1 : v_q);
}
__kernel void k_int_divmod(__global int *restrict out, __global const int *restrict in_a, __global const int *restrict in_b) {
    int gid = (int)get_global_id(0);
    if ((uint)gid >= 8u) return;
    int v_x = 0;
    int v_y = 0;
    v_x = in_a[gid];
    v_y = in_b[gid];
    out[gid] = sp_floordiv_i32(v_x, v_y) * 100 + sp_floormod_i32(v_x, v_y);
    return;
}
