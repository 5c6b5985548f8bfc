// Does nothing: measures launch + synchronize.
extern "C" __global__ void empty() {}
