// Device calls: many parameters (scalars of every width, structs by value), recursion, function pointers
// (indirect calls through .callprototype), and a noreturn-ish path.
struct Triple { double a; float b; char c; };
struct Big { int v[9]; };

__device__ __noinline__ double many(int a, long long b, float c, double d, unsigned char e, short f,
                                    Triple t, Big g, float* out, int h, int i, int j)
{
    double s = a + b + c + d + e + f + t.a + t.b + t.c + h + i + j;
    for (int k = 0; k < 9; ++k) s += g.v[k];
    out[0] = (float)s;
    return s * 2;
}

__device__ __noinline__ Triple make_triple(int x)
{
    Triple t = {x * 1.5, x * 0.5f, (char)x};
    return t;
}

__device__ __noinline__ unsigned fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__device__ __noinline__ int ackermann(int m, int n)
{
    if (m == 0) return n + 1;
    if (n == 0) return ackermann(m - 1, 1);
    return ackermann(m - 1, ackermann(m, n - 1));
}

__device__ float op_add(float x, float y) { return x + y; }
__device__ float op_mul(float x, float y) { return x * y; }
__device__ float op_max(float x, float y) { return fmaxf(x, y); }
typedef float (*binop)(float, float);
__device__ binop table[3] = {op_add, op_mul, op_max};
__device__ void (*void_fp)(int*);
__device__ void set_one(int* p) { *p = 1; }

__global__ void call_everything(float* out, int* iout, int sel)
{
    int t = threadIdx.x;
    Big g;
    for (int k = 0; k < 9; ++k) g.v[k] = t + k;
    Triple tr = make_triple(t);
    out[t] = (float)many(t, 1LL << 40, 0.5f, 0.25, 200, -3, tr, g, out + 64, 1, 2, 3);
    iout[t] = fib(t & 15) + ackermann(2, t & 3);
    binop f = table[sel % 3];
    out[t + 32] = f(out[t], 2.0f);
    void_fp = set_one;
    void_fp(iout + 100);
}
