/*
 * One block of GPU work for bench/gpu_check.sh, needing only the NVIDIA driver (no CUDA toolkit):
 * libcuda.so.1 and libnvidia-ml.so.1 are opened with dlopen and the few functions used are
 * declared here by hand, with the driver API's types (CUresult and CUdevice are int, handles are
 * pointers, CUdeviceptr is a 64-bit integer on 64-bit hosts).
 *
 *   gpu_load BLOCK_ID OUT_DIR
 *   gpu_load probe        exit 0 when the driver has a device, 7 when it reports none
 *
 * Block b holds (256 + 128 * (b % 4)) MiB of device memory and keeps the device busy with a
 * kernel (PTX text, JIT-compiled by the driver) for DUTY[b % 4] percent of every 100 ms, for
 * 3 s. Meanwhile a thread reads NVML directly every 20 ms: the device's utilisation and this
 * process's device memory. It writes OUT_DIR/block_<id>.txt:
 *   <time-weighted mean utilisation %> <peak process memory bytes> <requested bytes> <duty %>
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;

#define CU_DEVICE_ATTRIBUTE_CLOCK_RATE 13 /* kHz */

typedef struct {
  unsigned int gpu, memory;
} nvml_utilization;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvml_process_info; /* nvmlProcessInfo_t: 24 bytes, usedGpuMemory at offset 8 */

static const int DUTY[4] = {100, 60, 30, 80};
static const double BLOCK_SECONDS = 3.0;
static const double PERIOD_MS = 100.0;

/* A kernel that spins until `cycles` clock ticks have passed. */
static const char PTX[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry spin(.param .u64 cycles)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .u64 %start, %now, %limit, %elapsed;\n"
    "  ld.param.u64 %limit, [cycles];\n"
    "  mov.u64 %start, %clock64;\n"
    "SPIN:\n"
    "  mov.u64 %now, %clock64;\n"
    "  sub.u64 %elapsed, %now, %start;\n"
    "  setp.lt.u64 %p, %elapsed, %limit;\n"
    "  @%p bra SPIN;\n"
    "  ret;\n"
    "}\n";

static CUresult (*cuInit)(unsigned int);
static CUresult (*cuDeviceGet)(CUdevice *, int);
static CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*cuDeviceGetUuid)(unsigned char *, CUdevice);
static CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
static CUresult (*cuCtxDestroy)(CUcontext);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*cuMemFree)(CUdeviceptr);
static CUresult (*cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, void *, void **, void **);

static int (*nvmlInit)(void);
static int (*nvmlShutdown)(void);
static int (*nvmlDeviceGetHandleByUUID)(const char *, void **);
static int (*nvmlDeviceGetUtilizationRates)(void *, nvml_utilization *);
static int (*nvmlDeviceGetComputeRunningProcesses)(void *, unsigned int *, nvml_process_info *);

static void *need(void *library, const char *name) {
  void *f = dlsym(library, name);
  if (f == NULL) {
    fprintf(stderr, "gpu_load: the driver library lacks %s\n", name);
    exit(3);
  }
  return f;
}

/* The first of two names the driver exports (a newer entry point, else the older one). */
static void *need_either(void *library, const char *newer, const char *older) {
  void *f = dlsym(library, newer);
  return f != NULL ? f : need(library, older);
}

#define CHECK(call)                                                                    \
  do {                                                                                 \
    CUresult rc_ = (call);                                                             \
    if (rc_ != 0) {                                                                    \
      fprintf(stderr, "gpu_load: %s failed with CUresult %d\n", #call, rc_);           \
      exit(4);                                                                         \
    }                                                                                  \
  } while (0)

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* NVML read directly while the block runs. */
static void *nvml_device;
static volatile int monitoring = 1;
static double util_weighted = 0, util_weight = 0;
static unsigned long long peak_bytes = 0;

static void *monitor(void *unused) {
  (void)unused;
  unsigned int pid = (unsigned int)getpid();
  nvml_process_info infos[256];
  double last = now_ms();
  while (monitoring) {
    usleep(20000);
    double t = now_ms();
    nvml_utilization u;
    if (nvmlDeviceGetUtilizationRates(nvml_device, &u) == 0) {
      util_weighted += u.gpu * (t - last);
      util_weight += t - last;
    }
    last = t;
    unsigned int count = 256;
    if (nvmlDeviceGetComputeRunningProcesses(nvml_device, &count, infos) == 0) {
      unsigned long long mine = 0;
      for (unsigned int i = 0; i < count; i++) {
        if (infos[i].pid == pid) mine += infos[i].usedGpuMemory;
      }
      if (mine > peak_bytes) peak_bytes = mine;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  int probe = argc == 2 && strcmp(argv[1], "probe") == 0;
  if (argc != 3 && !probe) {
    fprintf(stderr, "usage: gpu_load BLOCK_ID OUT_DIR | gpu_load probe\n");
    return 2;
  }
  int block = probe ? 0 : atoi(argv[1]);
  int duty = DUTY[block % 4];
  size_t bytes = (size_t)(256 + 128 * (block % 4)) << 20;

  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == NULL) {
    fprintf(stderr, "gpu_load: %s\n", dlerror());
    return 3;
  }
  void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (nvml == NULL) {
    fprintf(stderr, "gpu_load: %s\n", dlerror());
    return 3;
  }
  *(void **)&cuInit = need(cuda, "cuInit");
  *(void **)&cuDeviceGet = need(cuda, "cuDeviceGet");
  *(void **)&cuDeviceGetAttribute = need(cuda, "cuDeviceGetAttribute");
  *(void **)&cuDeviceGetUuid = need_either(cuda, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
  *(void **)&cuCtxCreate = need(cuda, "cuCtxCreate_v2");
  *(void **)&cuCtxDestroy = need(cuda, "cuCtxDestroy_v2");
  *(void **)&cuCtxSynchronize = need(cuda, "cuCtxSynchronize");
  *(void **)&cuMemAlloc = need(cuda, "cuMemAlloc_v2");
  *(void **)&cuMemsetD8 = need(cuda, "cuMemsetD8_v2");
  *(void **)&cuMemFree = need(cuda, "cuMemFree_v2");
  *(void **)&cuModuleLoadData = need(cuda, "cuModuleLoadData");
  *(void **)&cuModuleGetFunction = need(cuda, "cuModuleGetFunction");
  *(void **)&cuLaunchKernel = need(cuda, "cuLaunchKernel");
  *(void **)&nvmlInit = need(nvml, "nvmlInit_v2");
  *(void **)&nvmlShutdown = need(nvml, "nvmlShutdown");
  *(void **)&nvmlDeviceGetHandleByUUID = need(nvml, "nvmlDeviceGetHandleByUUID");
  *(void **)&nvmlDeviceGetUtilizationRates = need(nvml, "nvmlDeviceGetUtilizationRates");
  *(void **)&nvmlDeviceGetComputeRunningProcesses =
      need(nvml, "nvmlDeviceGetComputeRunningProcesses_v3");

  CUdevice device;
  CUcontext context;
  CUmodule module;
  CUfunction spin;
  CUdeviceptr memory;
  int khz = 0;
  unsigned char uuid[16];
  if (probe) {
    CUresult rc = cuInit(0);
    if (rc == 0) rc = cuDeviceGet(&device, 0);
    if (rc == 0) rc = nvmlInit();
    if (rc != 0) fprintf(stderr, "gpu_load: no usable device (CUresult/nvmlReturn_t %d)\n", rc);
    return rc == 0 ? 0 : 7;
  }
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&device, 0)); /* the first device of this process's CUDA_VISIBLE_DEVICES */
  if (cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device) != 0 || khz <= 0) {
    khz = 1500000; /* the attribute is deprecated in newer drivers: assume 1.5 GHz */
    fprintf(stderr, "gpu_load: no clock rate from the driver; assuming 1.5 GHz\n");
  }
  CHECK(cuDeviceGetUuid(uuid, device));
  CHECK(cuCtxCreate(&context, 0, device));
  CHECK(cuMemAlloc(&memory, bytes));
  CHECK(cuMemsetD8(memory, 0x5a, bytes)); /* touch every page */
  CHECK(cuModuleLoadData(&module, PTX));
  CHECK(cuModuleGetFunction(&spin, module, "spin"));

  /* NVML's name for the same device: "GPU-" and the UUID as 8-4-4-4-12 hex digits. */
  char name[64];
  int at = snprintf(name, sizeof name, "GPU-");
  for (int i = 0; i < 16; i++) {
    at += snprintf(name + at, sizeof name - at, "%02x%s", uuid[i],
                   i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
  }
  if (nvmlInit() != 0 || nvmlDeviceGetHandleByUUID(name, &nvml_device) != 0) {
    fprintf(stderr, "gpu_load: NVML does not know %s\n", name);
    return 5;
  }
  pthread_t thread;
  pthread_create(&thread, NULL, monitor, NULL);

  double busy_ms = PERIOD_MS * duty / 100.0;
  unsigned long long cycles = (unsigned long long)(busy_ms * khz);
  void *args[] = {&cycles};
  double end = now_ms() + BLOCK_SECONDS * 1e3;
  while (now_ms() < end) {
    double period_start = now_ms();
    if (cycles > 0) {
      CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
      CHECK(cuCtxSynchronize());
    }
    double left = PERIOD_MS - (now_ms() - period_start);
    if (left > 0) usleep((useconds_t)(left * 1e3));
  }
  monitoring = 0;
  pthread_join(thread, NULL);

  char path[4096];
  snprintf(path, sizeof path, "%s/block_%d.txt", argv[2], block);
  FILE *out = fopen(path, "w");
  if (out == NULL) return 6;
  fprintf(out, "%.2f %llu %zu %d\n", util_weight > 0 ? util_weighted / util_weight : -1.0,
          peak_bytes, bytes, duty);
  fclose(out);
  CHECK(cuMemFree(memory));
  CHECK(cuCtxDestroy(context));
  nvmlShutdown();
  return 0;
}
