// APRON_HD: marks functions callable from host and device code (CUDA's __host__ __device__ under
// nvcc, nothing otherwise). Its own header so that plain types (Box) need not pull in Thrust.
#pragma once

#if defined(__CUDACC__)
#define APRON_HD __host__ __device__
#define APRON_DEVICE_CODE 1
#else
#define APRON_HD
#endif
