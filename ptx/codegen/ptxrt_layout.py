"""Field offsets of the CPU runtime's launch record (struct ptx_launch, %L) and worker (struct
ptx_worker, %W), as ptxrt.h lays them out."""

L_PARAMS, L_GRID, L_BLOCK, L_DYN_SHARED, L_STATIC_SHARED, L_GRID_WORKSPACE = 0, 8, 20, 32, 36, 48
L_CLUSTER, L_CLUSTER_EXPLICIT = 56, 68
W_SHARED, W_SCRATCH, W_WORKER_ID = 0, 8, 24
W_CLUSTER_SHARED, W_CLUSTER_RANK, W_CLUSTER_SIZE = 48, 56, 60
