// Dense switches (may become branch chains or jump tables) and an explicit brx.idx jump table in inline
// PTX, so the corpus always holds .branchtargets.
__device__ __noinline__ int dense(int k, const int* o)
{
    switch (k) {
    case 0: return o[3] * o[4];
    case 1: return o[5] + o[6];
    case 2: return o[7] - o[8];
    case 3: return o[9] / (o[10] | 1);
    case 4: return o[11] % (o[12] | 1);
    case 5: return o[13] ^ o[14];
    case 6: return o[15] | o[16];
    case 7: return o[17] & o[18];
    case 8: return o[19] << (o[20] & 31);
    case 9: return o[21] >> (o[22] & 31);
    case 10: return o[23] * 7;
    case 11: return o[24] * 9;
    case 12: return o[25] - 1;
    case 13: return o[26] + 100;
    default: return -1;
    }
}

__global__ void switches(int* out, const int* in, int k)
{
    int t = threadIdx.x;
    out[t] = dense((k + t) & 15, in);
    int r;
    asm("{\n\t"
        ".reg .b32 idx;\n\t"
        ".reg .pred oob;\n\t"
        "and.b32 idx, %1, 3;\n\t"
        "setp.gt.u32 oob, idx, 2;\n\t"
        "@oob bra $Ldefault;\n\t"
        "$Ltable: .branchtargets $Lc0, $Lc1, $Lc2;\n\t"
        "brx.idx idx, $Ltable;\n"
        "$Lc0:\n\t"
        "mov.u32 %0, 10;\n\t"
        "bra.uni $Ldone;\n"
        "$Lc1:\n\t"
        "mov.u32 %0, 11;\n\t"
        "bra.uni $Ldone;\n"
        "$Lc2:\n\t"
        "mov.u32 %0, 12;\n\t"
        "bra.uni $Ldone;\n"
        "$Ldefault:\n\t"
        "mov.u32 %0, -1;\n"
        "$Ldone:\n\t"
        "}"
        : "=r"(r) : "r"(k + t));
    out[t + 64] = r;
}
