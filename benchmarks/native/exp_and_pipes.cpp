// Stand-alone microbenchmarks behind NOTES.md "session 18, s18-rowdim" (tensor-core): the
// throughput of 512-bit vector operations on this machine's core, and the cost of float32 exp
// variants on 16 lanes (from L1, thread CPU time). Not part of the build.
//
//   g++ -O3 -march=native -fno-math-errno -std=c++17 -I packages/tensor-core/csrc/common \
//       benchmarks/native/exp_and_pipes.cpp -o /tmp/exp_and_pipes && /tmp/exp_and_pipes
//
// Finding (Zen 4, session 18): a 512-bit FMA/mul issues once a cycle, an add/min/max once a cycle
// beside it, integer adds twice, and any mix at most two 512-bit operations a cycle; vscalefps
// alone once every 2 cycles. An exp of 16 floats takes ~12-16 such operations whatever its
// polynomial (table forms add the lookup and the blend), so 6-8 cycles: ~2-3 ns a vector.
#include <immintrin.h>
#include <cstdio>
#include <cmath>
#include <ctime>
#include <vector>
#include <cstring>
#include "vecmath.h"
using namespace ember;
static double cpu_now(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
// table 2^(j/64), j=0..63 in 4 registers
alignas(64) static float T64[64];
static __m512 t0,t1,t2,t3;
__attribute__((always_inline)) inline __m512 exp_tab64(__m512 x) {
  const __mmask16 all = 0xFFFF;
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(104.0f), _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), x));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 kf = _mm512_fmadd_ps(xc, _mm512_set1_ps(64.0f*1.44269504088896341f), shifter);
  const __m512 k = _mm512_sub_ps(kf, shifter);
  const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693147180559945f/64), xc);
  const __m512i ki = _mm512_castps_si512(kf);
  const __m512 lo = _mm512_permutex2var_ps(t0, ki, t1);
  const __m512 hi = _mm512_permutex2var_ps(t2, ki, t3);
  const __mmask16 up = _mm512_test_epi32_mask(ki, _mm512_set1_epi32(32));
  const __m512 T = _mm512_mask_blend_ps(up, lo, hi);
  const __m512 p = _mm512_fmadd_ps(_mm512_mul_ps(r, _mm512_set1_ps(0.5f)), r, r);
  const __m512 res = _mm512_fmadd_ps(T, p, T);
  // scale by 2^(k>>6) with integer ops (valid for normal results)
  const __m512i e = _mm512_slli_epi32(_mm512_srai_epi32(_mm512_sub_epi32(ki, _mm512_set1_epi32(0x4B400000)), 6), 23);
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(res), e));
}
__attribute__((always_inline)) inline __m512 exp_tab64s(__m512 x) {
  const __mmask16 all = 0xFFFF;
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(104.0f), _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), x));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 kf = _mm512_fmadd_ps(xc, _mm512_set1_ps(64.0f*1.44269504088896341f), shifter);
  const __m512 k = _mm512_sub_ps(kf, shifter);
  const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693147180559945f/64), xc);
  const __m512i ki = _mm512_castps_si512(kf);
  const __m512 lo = _mm512_permutex2var_ps(t0, ki, t1);
  const __m512 hi = _mm512_permutex2var_ps(t2, ki, t3);
  const __mmask16 up = _mm512_test_epi32_mask(ki, _mm512_set1_epi32(32));
  const __m512 T = _mm512_mask_blend_ps(up, lo, hi);
  const __m512 p = _mm512_fmadd_ps(_mm512_mul_ps(r, _mm512_set1_ps(0.5f)), r, r);
  const __m512 res = _mm512_fmadd_ps(T, p, T);
  return _mm512_maskz_scalef_ps(all, res, _mm512_mul_ps(k, _mm512_set1_ps(1.0f/64)));
}
// exp_term with int scale instead of scalef
__attribute__((always_inline)) inline __m512 exp_term_int(__m512 x) {
  const __mmask16 all = 0xFFFF;
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(104.0f), _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), x));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 kf = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), shifter);
  const __m512 n = _mm512_sub_ps(kf, shifter);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945f), xc);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(8.300990797579288e-3f), r, _mm512_set1_ps(4.188389703631401e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.666724532842636e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.999929964542389e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(kf), 23);
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
}
template <class F> double run(const float* x, int n, int reps, F f, float& sink) {
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    double t = cpu_now();
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    for (int it = 0; it < reps; ++it)
      for (int i = 0; i < n; i += 32) {
        a0 = _mm512_add_ps(a0, f(_mm512_load_ps(x + i)));
        a1 = _mm512_add_ps(a1, f(_mm512_load_ps(x + i + 16)));
      }
    t = cpu_now() - t;
    sink += _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    best = std::min(best, t / (double(reps) * n / 16) * 1e9);
  }
  return best;
}
int exp_main() {
  for (int j = 0; j < 64; ++j) T64[j] = (float)std::exp2(j / 64.0);
  t0 = _mm512_load_ps(T64); t1 = _mm512_load_ps(T64 + 16); t2 = _mm512_load_ps(T64 + 32); t3 = _mm512_load_ps(T64 + 48);
  const int n = 4096;
  float* x = (float*)aligned_alloc(64, n * 4);
  for (int i = 0; i < n; ++i) x[i] = -20.0f * (float)((i * 2654435761u) % 1000003) / 1000003.0f;
  float sink = 0;
  // accuracy over [-87, 0]
  for (int v = 0; v < 4; ++v) {
    double maxu = 0; float worst = 0;
    for (float a = -87.0f; a < 0.0f; a = std::nextafter(a, 1.0f) ) {
      // sample every 97th float
      float buf[16]; for (int l = 0; l < 16; ++l) { buf[l] = a; for (int q=0;q<97;++q) a = std::nextafter(a, 1.0f);} 
      __m512 xv = _mm512_loadu_ps(buf), y;
      if (v == 0) y = exp_term_m512(xv); else if (v == 1) y = exp_tab64(xv); else if (v==2) y = exp_tab64s(xv); else y = exp_term_int(xv);
      float out[16]; _mm512_storeu_ps(out, y);
      for (int l = 0; l < 16; ++l) { double ref = std::exp((double)buf[l]); double u = std::fabs(out[l] - ref) / (std::nextafter((float)ref, INFINITY) - (float)ref); if (u > maxu) { maxu = u; worst = buf[l]; } }
      if (a >= 0) break;
    }
    printf("variant %d max ulp %.3f at %g\n", v, maxu, worst);
  }
  for (int round = 0; round < 3; ++round) {
    printf("exp_term %.3f ns  ", run(x, n, 2000, [](__m512 v){return exp_term_m512(v);}, sink));
    printf("exp_vec %.3f ns  ", run(x, n, 2000, [](__m512 v){return (__m512)exp_vec((VecF)v);}, sink));
    printf("tab64int %.3f ns  ", run(x, n, 2000, [](__m512 v){return exp_tab64(v);}, sink));
    printf("tab64scalef %.3f ns  ", run(x, n, 2000, [](__m512 v){return exp_tab64s(v);}, sink));
    printf("term_int %.3f ns  ", run(x, n, 2000, [](__m512 v){return exp_term_int(v);}, sink));
    printf("load+add %.3f ns\n", run(x, n, 2000, [](__m512 v){return v;}, sink));
  }
  printf("%g\n", sink);
}

#define M 20000000L
#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
int pipes_main_a(){
  double t=cpu_now(); long x=0; for(long i=0;i<M*5;++i){ asm volatile("add $1, %0" : "+r"(x)); } t=cpu_now()-t;
  double ghz = M*5/t/1e9; printf("clock ~%.2f GHz\n", ghz);
  const char* names[] = {"fma x12", "add x12", "6fma+6add", "scalef x12", "max x12", "6fma+6max", "perm x12", "6fma+6perm", "4fma+4add+4max"};
  for (int v = 0; v < 9; ++v) {
    t = cpu_now();
    asm volatile("vbroadcastss %0, %%zmm20" :: "m"(*(const float*)&ghz) : "xmm20");
    for (long i = 0; i < M; ++i) {
      switch (v) {
#define F(k) "vfmadd231ps %%zmm20, %%zmm21, %%zmm" #k "\n"
#define A(k) "vaddps %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#define S(k) "vscalefps %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#define X(k) "vmaxps %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#define P(k) "vpermps %%zmm" #k ", %%zmm20, %%zmm" #k "\n"
        case 0: asm volatile(REP12(F) ::: "memory"); break;
        case 1: asm volatile(REP12(A) ::: "memory"); break;
        case 2: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) A(6) A(7) A(8) A(9) A(10) A(11) ::: "memory"); break;
        case 3: asm volatile(REP12(S) ::: "memory"); break;
        case 4: asm volatile(REP12(X) ::: "memory"); break;
        case 5: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) X(6) X(7) X(8) X(9) X(10) X(11) ::: "memory"); break;
        case 6: asm volatile(REP12(P) ::: "memory"); break;
        case 7: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) P(6) P(7) P(8) P(9) P(10) P(11) ::: "memory"); break;
        case 8: asm volatile(F(0) F(1) F(2) F(3) A(4) A(5) A(6) A(7) X(8) X(9) X(10) X(11) ::: "memory"); break;
      }
    }
    t = cpu_now() - t;
    printf("%-16s %.3f cycles per op\n", names[v], t / (M * 12) * 1e9 * ghz);
  }
}

int pipes_main_b(){
  double t=cpu_now(); long x=0; for(long i=0;i<M*5;++i){ asm volatile("add $1, %0" : "+r"(x)); } t=cpu_now()-t;
  double ghz = M*5/t/1e9; printf("clock ~%.2f GHz\n", ghz);
  const char* names[] = {"6fma+6scalef", "6add+6scalef", "6fma+6paddd", "6add+6paddd", "6fma+6pslld", "paddd x12", "4fma+4add+4paddd", "6fma+3scalef", "fma x12"};
  for (int v = 0; v < 9; ++v) {
    t = cpu_now();
    asm volatile("vbroadcastss %0, %%zmm20" :: "m"(*(const float*)&ghz) : "xmm20");
    for (long i = 0; i < M; ++i) {
      switch (v) {
#define F(k) "vfmadd231ps %%zmm20, %%zmm21, %%zmm" #k "\n"
#define A(k) "vaddps %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#define S(k) "vscalefps %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#define X(k) "vmaxps %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#define P(k) "vpermps %%zmm" #k ", %%zmm20, %%zmm" #k "\n"
#undef I
#define I(k) "vpaddd %%zmm20, %%zmm" #k ", %%zmm" #k "\n"
#undef L
#define L(k) "vpslld $1, %%zmm" #k ", %%zmm" #k "\n"
        case 0: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) S(6) S(7) S(8) S(9) S(10) S(11) ::: "memory"); break;
        case 1: asm volatile(A(0) A(1) A(2) A(3) A(4) A(5) S(6) S(7) S(8) S(9) S(10) S(11) ::: "memory"); break;
        case 2: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) I(6) I(7) I(8) I(9) I(10) I(11) ::: "memory"); break;
        case 3: asm volatile(A(0) A(1) A(2) A(3) A(4) A(5) I(6) I(7) I(8) I(9) I(10) I(11) ::: "memory"); break;
        case 4: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) L(6) L(7) L(8) L(9) L(10) L(11) ::: "memory"); break;
        case 5: asm volatile(REP12(I) ::: "memory"); break;
        case 6: asm volatile(F(0) F(1) F(2) F(3) A(4) A(5) A(6) A(7) I(8) I(9) I(10) I(11) ::: "memory"); break;
        case 7: asm volatile(F(0) F(1) F(2) F(3) F(4) F(5) S(6) S(7) S(8) ::: "memory"); break;
        case 8: asm volatile(REP12(F) ::: "memory"); break;
      }
    }
    t = cpu_now() - t;
    printf("%-16s %.3f cycles per op\n", names[v], t / (M * 12) * 1e9 * ghz);
  }
}

int main() {
  pipes_main_a();
  pipes_main_b();
  return exp_main();
}
