/* Runs an ember AOT package with no Python: aoti_main PACKAGE_DIR INPUTS OUTPUTS.
 *
 * INPUTS and OUTPUTS use one small binary format: int64 count, then per tensor int64 dtype
 * code (ember_aoti.h), int64 ndim, int64 sizes[ndim], then the contiguous data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ember_aoti.h"

static size_t itemsize(int64_t dtype) {
    switch (dtype) {
    case EMBER_AOTI_FLOAT64: case EMBER_AOTI_INT64: return 8;
    case EMBER_AOTI_FLOAT32: case EMBER_AOTI_INT32: return 4;
    default: return 1;
    }
}

static int64_t read_i64(FILE *f) {
    int64_t v = 0;
    if (fread(&v, sizeof v, 1, f) != 1) { fprintf(stderr, "truncated input file\n"); exit(2); }
    return v;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s PACKAGE_DIR INPUTS OUTPUTS\n", argv[0]); return 2; }
    EmberAotiRunner *runner = ember_aoti_create(argv[1]);
    if (!runner) { fprintf(stderr, "create: %s\n", ember_aoti_last_error()); return 1; }
    FILE *in = fopen(argv[2], "rb");
    if (!in) { perror("inputs"); return 2; }
    int64_t n = read_i64(in);
    if (n != ember_aoti_num_inputs()) { fprintf(stderr, "the library takes %d inputs\n", ember_aoti_num_inputs()); return 2; }
    void **inputs = calloc((size_t)n, sizeof *inputs);
    int64_t **sizes = calloc((size_t)n, sizeof *sizes);
    for (int64_t i = 0; i < n; i++) {
        int64_t dtype = read_i64(in), ndim = read_i64(in), count = 1;
        sizes[i] = calloc((size_t)(ndim > 0 ? ndim : 1), sizeof **sizes);
        for (int64_t d = 0; d < ndim; d++) { sizes[i][d] = read_i64(in); count *= sizes[i][d]; }
        inputs[i] = malloc((size_t)count * itemsize(dtype) + 1);
        if (fread(inputs[i], itemsize(dtype), (size_t)count, in) != (size_t)count) { fprintf(stderr, "short data\n"); return 2; }
    }
    fclose(in);
    int nout = ember_aoti_num_outputs();
    void **outputs = calloc((size_t)nout, sizeof *outputs);
    int64_t **out_sizes = calloc((size_t)nout, sizeof *out_sizes);
    for (int k = 0; k < nout; k++) out_sizes[k] = calloc((size_t)(ember_aoti_output_ndim(k) + 1), sizeof **out_sizes);
    if (ember_aoti_run(runner, (const void *const *)inputs, (const int64_t *const *)sizes, outputs, out_sizes) != 0) {
        fprintf(stderr, "run: %s\n", ember_aoti_last_error());
        return 1;
    }
    FILE *out = fopen(argv[3], "wb");
    int64_t count64 = nout;
    fwrite(&count64, sizeof count64, 1, out);
    for (int k = 0; k < nout; k++) {
        int64_t dtype = ember_aoti_output_dtype(k), ndim = ember_aoti_output_ndim(k), count = 1;
        fwrite(&dtype, sizeof dtype, 1, out);
        fwrite(&ndim, sizeof ndim, 1, out);
        for (int64_t d = 0; d < ndim; d++) { fwrite(&out_sizes[k][d], sizeof(int64_t), 1, out); count *= out_sizes[k][d]; }
        fwrite(outputs[k], itemsize(dtype), (size_t)count, out);
        ember_aoti_free(outputs[k]);
    }
    fclose(out);
    for (int64_t i = 0; i < n; i++) { free(inputs[i]); free(sizes[i]); }
    ember_aoti_destroy(runner);
    printf("ok\n");
    return 0;
}
