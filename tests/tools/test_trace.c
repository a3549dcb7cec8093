/* The trace parser: two PyTorch traces recorded for this project (tests/data/torch;
 * override the folder with CA_TRACES_DIR), the tolerated variations, and every malformed case with the
 * exact "NAME:LINE: what" message. */
#define _GNU_SOURCE
#include <check.h>

#include "tests/check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "tools/trace.h"

#define HDR "Thread,Time,Action,Pointer,Size,Stream\n"

static char trace_path[512];
static const char *traces(const char *file)
{
    const char *dir = getenv("CA_TRACES_DIR");
    snprintf(trace_path, sizeof trace_path, "%s/%s", dir ? dir : "tests/data/torch", file);
    return trace_path;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static ca_trace parse_ok(const char *text)
{
    ca_trace t;
    char err[256];
    int rc = ca_trace_parse_buffer("t.csv", text, strlen(text), &t, err, sizeof err);
    ck_assert_msg(rc == 0, "should parse, got: %s", err);
    ck_assert_str_eq(err, "");
    return t;
}

/* Parsing fails with exactly this message, and leaves nothing behind. */
static void parse_fails(const char *text, const char *want)
{
    ca_trace t;
    char err[256];
    int rc = ca_trace_parse_buffer("t.csv", text, strlen(text), &t, err, sizeof err);
    ck_assert_msg(rc == -1, "should fail with '%s':\n%s", want, text);
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(t.ops);
    ck_assert_uint_eq(t.n_ops, 0);
    ck_assert_uint_eq(t.n_ids, 0);
}

START_TEST(real_traces)
{
    /* Expected figures computed from the files by an independent reader
     * (Python's csv module: counts, most live at once, peak of live bytes). */
    static const struct {
        const char *file;
        size_t allocs, frees, iterations, ids, live_at_end;
        uint64_t peak, first_ptr, first_size, first_thread;
    } want[] = {
        {"gpt_fixed.csv", 15721, 15721, 50, 110, 0, 5338000, 0x2f1896c0, 65536, 31750},
        {"gpt_varying_big.csv", 30790, 30790, 40, 272, 0, 126278964, 0x2cea75c0, 131072, 17107},
    };
    for (size_t k = 0; k < 2; k++) {
        ca_trace t;
        char err[256];
        double t0 = now();
        int rc = ca_trace_parse_file(traces(want[k].file), &t, err, sizeof err);
        double dt = now() - t0;
        ck_assert_msg(rc == 0, "%s", err);
        printf("%s: %zu ops parsed in %.2f ms\n", want[k].file, t.n_ops, dt * 1e3);
        ck_assert_uint_eq(t.count[CA_TRACE_ALLOC], want[k].allocs);
        ck_assert_uint_eq(t.count[CA_TRACE_FREE], want[k].frees);
        ck_assert_uint_eq(t.count[CA_TRACE_ALLOC_FAIL], 0);
        ck_assert_uint_eq(t.count[CA_TRACE_ITERATION], want[k].iterations);
        ck_assert_uint_eq(t.n_ops, want[k].allocs + want[k].frees + want[k].iterations);
        ck_assert_uint_eq(t.n_ids, want[k].ids);
        ck_assert_uint_eq(t.live_at_end, want[k].live_at_end);
        ck_assert_uint_eq(t.peak_live_bytes, want[k].peak);
        ck_assert_int_eq(t.ops[0].kind, CA_TRACE_ALLOC);
        ck_assert_uint_eq(t.ops[0].ptr, want[k].first_ptr);
        ck_assert_uint_eq(t.ops[0].size, want[k].first_size);
        ck_assert_uint_eq(t.ops[0].id, 0);
        ck_assert_uint_eq(t.ops[0].line, 2);
        ck_assert_uint_eq(t.ops[0].thread, want[k].first_thread);
        ck_assert_uint_eq(t.ops[t.n_ops - 1].line, t.n_ops + 1);

        /* Replaying through the ids alone gives the same sizes as the pointers. */
        uint64_t *size_of = calloc(t.n_ids, sizeof *size_of);
        uint64_t live = 0, peak = 0;
        for (size_t i = 0; i < t.n_ops; i++) {
            const ca_trace_op *o = &t.ops[i];
            if (o->kind == CA_TRACE_ITERATION) continue;
            ck_assert_uint_lt(o->id, t.n_ids);
            if (o->kind == CA_TRACE_ALLOC) {
                ck_assert_uint_eq(size_of[o->id], 0); /* an id is held by one at a time */
                size_of[o->id] = o->size;
                live += o->size;
                if (live > peak) peak = live;
            } else {
                ck_assert_uint_eq(size_of[o->id], o->size);
                size_of[o->id] = 0;
                live -= o->size;
            }
        }
        ck_assert_uint_eq(peak, want[k].peak);
        free(size_of);
        ck_assert(dt < 0.1 + 20e-6 * (double)t.n_ops); /* ~2 us an op at -O2; loose for sanitizers */
        ca_trace_free(&t);
        ck_assert_ptr_null(t.ops);
    }
}
END_TEST

START_TEST(every_action_and_field_form)
{
    ca_trace t = parse_ok(HDR
                          "140737,08:21:25.103218,allocate,0x10,256,0x7f00aa\n"
                          "0x2a,1,allocate,4096,512,7\n"
                          "1,2,allocate failure,0x0,1073741824,0x7f00aa\n"
                          "1,3,free,0x10,0,0x7f00aa\n"        /* size 0 on free */
                          "1,4,iteration,,3,0x0\n"            /* no pointer */
                          "1,5,allocate,0x20,100,0x0\n"       /* reuses 0x10's id */
                          "1,6,iteration,0x0,4,0x0\n"
                          "1,7,free,4096,512,7\n"             /* the size given, matching */
                          "1,8,free,0x20,100,0x0\n");
    ck_assert_uint_eq(t.n_ops, 9);
    ck_assert_uint_eq(t.count[CA_TRACE_ALLOC], 3);
    ck_assert_uint_eq(t.count[CA_TRACE_FREE], 3);
    ck_assert_uint_eq(t.count[CA_TRACE_ALLOC_FAIL], 1);
    ck_assert_uint_eq(t.count[CA_TRACE_ITERATION], 2);
    ck_assert_uint_eq(t.n_ids, 2);
    ck_assert_uint_eq(t.live_at_end, 0);
    ck_assert_uint_eq(t.peak_live_bytes, 768);

    const ca_trace_op *o = t.ops;
    ck_assert_int_eq(o[0].kind, CA_TRACE_ALLOC);
    ck_assert_uint_eq(o[0].thread, 140737);
    ck_assert_uint_eq(o[0].ptr, 0x10);
    ck_assert_uint_eq(o[0].size, 256);
    ck_assert_uint_eq(o[0].stream, 0x7f00aa);
    ck_assert_uint_eq(o[0].id, 0);
    ck_assert_uint_eq(o[1].thread, 0x2a);
    ck_assert_uint_eq(o[1].ptr, 4096);
    ck_assert_uint_eq(o[1].stream, 7);
    ck_assert_uint_eq(o[1].id, 1);
    ck_assert_int_eq(o[2].kind, CA_TRACE_ALLOC_FAIL);
    ck_assert_uint_eq(o[2].id, CA_TRACE_NO_ID);
    ck_assert_uint_eq(o[2].size, 1073741824);
    ck_assert_int_eq(o[3].kind, CA_TRACE_FREE);
    ck_assert_uint_eq(o[3].id, 0);
    ck_assert_uint_eq(o[3].size, 256); /* filled in from the allocation */
    ck_assert_int_eq(o[4].kind, CA_TRACE_ITERATION);
    ck_assert_uint_eq(o[4].size, 3);
    ck_assert_uint_eq(o[4].id, CA_TRACE_NO_ID);
    ck_assert_uint_eq(o[5].id, 0); /* the freed id again */
    ck_assert_uint_eq(o[7].id, 1);
    ck_assert_uint_eq(o[7].line, 9);
    ck_assert_str_eq(ca_trace_kind_name(CA_TRACE_ALLOC_FAIL), "allocate failure");
    ck_assert_str_eq(ca_trace_kind_name(CA_TRACE_ITERATION), "iteration");
    ck_assert_str_eq(ca_trace_kind_name((ca_trace_kind)42), "?");
    ca_trace_free(&t);
}
END_TEST

START_TEST(tolerated_layout)
{
    /* CRLF, trailing blanks, blanks around fields, blank lines, a byte order
     * mark, no newline at the end. */
    ca_trace t = parse_ok("\xef\xbb\xbfThread,Time,Action,Pointer,Size,Stream  \r\n"
                          "\r\n"
                          "1,0,allocate,0xA,64,0x0 \r\n"
                          "   \n"
                          " 1 , 1 , allocate failure , 0x0 , 99 , 0x0\t\r\n"
                          "1,2,free,0xa,64,0x0");
    ck_assert_uint_eq(t.n_ops, 3);
    ck_assert_uint_eq(t.ops[0].line, 3);
    ck_assert_uint_eq(t.ops[1].line, 5);
    ck_assert_int_eq(t.ops[1].kind, CA_TRACE_ALLOC_FAIL);
    ck_assert_uint_eq(t.ops[1].size, 99);
    ck_assert_uint_eq(t.ops[2].line, 6);
    ck_assert_uint_eq(t.ops[2].ptr, 0xa); /* hex digits in either case */
    ca_trace_free(&t);
    /* A header alone is an empty trace, not an error. */
    t = parse_ok(HDR);
    ck_assert_uint_eq(t.n_ops, 0);
    ck_assert_uint_eq(t.n_ids, 0);
    ca_trace_free(&t);
}
END_TEST

START_TEST(bad_header)
{
    parse_fails("", "t.csv:1: empty trace: expected the header "
                    "'Thread,Time,Action,Pointer,Size,Stream'");
    parse_fails("\n\r\n  \n", "t.csv:3: empty trace: expected the header "
                              "'Thread,Time,Action,Pointer,Size,Stream'");
    static const char *const bad[] = {
        "Thread,Time,Action,Pointer,Size\n",
        "Thread,Time,Action,Pointer,Size,Stream,Extra\n",
        "thread,time,action,pointer,size,stream\n",
        "Thread,Time,Action,Address,Size,Stream\n",
        "Thread, Time,Action,Pointer,Size,Stream\n",
        "1,0,allocate,0x10,256,0x0\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        parse_fails(bad[i], "t.csv:1: bad header: expected 'Thread,Time,Action,Pointer,Size,Stream'");
    parse_fails("\n\nThread;Time;Action;Pointer;Size;Stream\n",
                "t.csv:3: bad header: expected 'Thread,Time,Action,Pointer,Size,Stream'");
}
END_TEST

START_TEST(unknown_action)
{
    parse_fails(HDR "1,0,alloc,0x10,256,0x0\n",
                "t.csv:2: unknown action 'alloc' (allocate, free, allocate failure, iteration)");
    parse_fails(HDR "1,0,Allocate,0x10,256,0x0\n",
                "t.csv:2: unknown action 'Allocate' (allocate, free, allocate failure, iteration)");
    parse_fails(HDR "1,0,,0x10,256,0x0\n",
                "t.csv:2: unknown action '' (allocate, free, allocate failure, iteration)");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0\n1,1,deallocate,0x10,256,0x0\n",
                "t.csv:3: unknown action 'deallocate' (allocate, free, allocate failure, iteration)");
    /* A long bad field is quoted only in part. */
    parse_fails(HDR "1,0,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx,0x10,256,0x0\n",
                "t.csv:2: unknown action 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' "
                "(allocate, free, allocate failure, iteration)");
    /* Found by fuzzing (tests/fuzz/corpus/trace/regress_cr_in_action): a
     * carriage return inside a field printed raw made the message overwrite
     * itself on a terminal ('allocate' shown, 'alloc\rate' meant). Control
     * bytes are escaped, so the message stays one readable line. */
    parse_fails(HDR "1,0,alloc\rate,0x10,256,0x0\n",
                "t.csv:2: unknown action 'alloc\\x0date' (allocate, free, allocate failure, iteration)");
    parse_fails(HDR "1,0,allocate,0x1\x01,256,0x0\n",
                "t.csv:2: bad Pointer '0x1\\x01': expected a hex (0x...) or decimal number");
    static const char nul_row[] = HDR "1,0,free\0x,0x10,256,0x0\n";
    ca_trace t;
    char err[256];
    ck_assert_int_eq(ca_trace_parse_buffer("t.csv", nul_row, sizeof nul_row - 1, &t, err, sizeof err), -1);
    ck_assert_str_eq(err, "t.csv:2: unknown action 'free\\x00x' (allocate, free, allocate failure, iteration)");
}
END_TEST

START_TEST(wrong_number_of_fields)
{
    parse_fails(HDR "1,0,allocate,0x10,256\n", "t.csv:2: expected 6 fields, found 5");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0,\n", "t.csv:2: expected 6 fields, found 7");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0,9,9,9,9,9\n", "t.csv:2: expected 6 fields, found 11");
    parse_fails(HDR "garbage\n", "t.csv:2: expected 6 fields, found 1");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0\r\n\r\n1;1;free;0x10;256;0x0\r\n",
                "t.csv:4: expected 6 fields, found 1");
}
END_TEST

START_TEST(bad_numbers)
{
    const char *hexdec = "a hex (0x...) or decimal number";
    char want[256];
    static const struct { const char *row, *col, *text; } cases[] = {
        {"abc,0,allocate,0x10,256,0x0", "Thread", "abc"},
        {",0,allocate,0x10,256,0x0", "Thread", ""},
        {"1,0,allocate,0x,256,0x0", "Pointer", "0x"},
        {"1,0,allocate,0xZZ,256,0x0", "Pointer", "0xZZ"},
        {"1,0,allocate,-16,256,0x0", "Pointer", "-16"},
        {"1,0,allocate,,256,0x0", "Pointer", ""},
        {"1,0,free,0x 10,256,0x0", "Pointer", "0x 10"},
        {"1,0,allocate,0x10,12a,0x0", "Size", "12a"},
        {"1,0,allocate,0x10,0x100,0x0", "Size", "0x100"},
        {"1,0,allocate,0x10,-1,0x0", "Size", "-1"},
        {"1,0,allocate,0x10,1.5,0x0", "Size", "1.5"},

        {"1,0,allocate,0x10,,0x0", "Size", ""},
        {"1,0,allocate,0x10,256,stream0", "Stream", "stream0"},
        {"1,0,allocate,0x10,256,", "Stream", ""},
        {"1,0,iteration,,x,0x0", "Size", "x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, HDR "%s\n", cases[i].row);
        snprintf(want, sizeof want, "t.csv:2: bad %s '%s': expected %s", cases[i].col,
                 cases[i].text, strcmp(cases[i].col, "Size") ? hexdec : "decimal bytes");
        parse_fails(text, want);
    }
}
END_TEST

/* Any value that fits in 64 bits is read exactly; one past it is refused,
 * saying so (not as a malformed number). */
START_TEST(sixty_four_bits_exactly)
{
    ca_trace t = parse_ok(HDR "0xffffffffffffffff,0,allocate,0xffffffffffffffff,18446744073709551615,"
                              "18446744073709551615\n"
                              "1,1,allocate,0x0000000000000000001,18446744073709550000,0x0\n"
                              "1,2,allocate failure,0x2,18446744073709551615,0x0\n");
    ck_assert_uint_eq(t.ops[0].thread, UINT64_MAX);
    ck_assert_uint_eq(t.ops[0].ptr, UINT64_MAX);
    ck_assert_uint_eq(t.ops[0].size, UINT64_MAX);
    ck_assert_uint_eq(t.ops[0].stream, UINT64_MAX);
    ck_assert_uint_eq(t.ops[1].ptr, 1);
    ck_assert_uint_eq(t.ops[1].size, 18446744073709550000u);
    ck_assert_uint_eq(t.ops[2].size, UINT64_MAX);
    ca_trace_free(&t);
    static const struct { const char *row, *col, *text, *most; } cases[] = {
        {"1,0,allocate,0x10,18446744073709551616,0x0", "Size", "18446744073709551616", "18446744073709551615"},
        {"1,0,allocate,0x10,99999999999999999999,0x0", "Size", "99999999999999999999", "18446744073709551615"},
        {"1,0,allocate,0x1ffffffffffffffff,256,0x0", "Pointer", "0x1ffffffffffffffff", "0xffffffffffffffff"},
        {"1,0,allocate,18446744073709551616,256,0x0", "Pointer", "18446744073709551616", "18446744073709551615"},
        {"18446744073709551616,0,allocate,0x1,256,0x0", "Thread", "18446744073709551616", "18446744073709551615"},
        {"1,0,allocate,0x1,256,0x10000000000000000", "Stream", "0x10000000000000000", "0xffffffffffffffff"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256], want[256];
        snprintf(text, sizeof text, HDR "%s\n", cases[i].row);
        snprintf(want, sizeof want, "t.csv:2: bad %s '%s': larger than %s, the most 64 bits hold", cases[i].col,
                 cases[i].text, cases[i].most);
        parse_fails(text, want);
    }
}
END_TEST

/* The sum of live sizes can pass 2^64: its peak saturates, never wraps. */
START_TEST(peak_live_bytes_never_wraps)
{
    ca_trace t = parse_ok(HDR "1,0,allocate,0x1,9223372036854775808,0x0\n"
                              "1,1,allocate,0x2,9223372036854775808,0x0\n"
                              "1,2,free,0x1,0,0x0\n1,3,free,0x2,0,0x0\n"
                              "1,4,allocate,0x3,5,0x0\n");
    ck_assert_uint_eq(t.peak_live_bytes, UINT64_MAX);
    ca_trace_free(&t);
    t = parse_ok(HDR "1,0,allocate,0x1,18446744073709551615,0x0\n1,1,free,0x1,0,0x0\n"
                     "1,2,allocate,0x2,7,0x0\n1,3,allocate,0x3,18446744073709551608,0x0\n");
    ck_assert_uint_eq(t.peak_live_bytes, UINT64_MAX); /* 7 + (2^64 - 8): exactly the most */
    ca_trace_free(&t);
    t = parse_ok(HDR "1,0,allocate,0x1,9223372036854775808,0x0\n1,1,free,0x1,0,0x0\n"
                     "1,2,allocate,0x2,9223372036854775808,0x0\n");
    ck_assert_uint_eq(t.peak_live_bytes, UINT64_C(9223372036854775808));
    ca_trace_free(&t);
}
END_TEST

/* A replay's granule follows the rows, not the sizes named (issue 30). */
START_TEST(granule_follows_rows)
{
    ca_trace t = parse_ok(HDR "1,0,allocate,0x1,85899345920,0x0\n1,1,free,0x1,0,0x0\n"); /* 80 GiB */
    ck_assert_uint_eq(ca_trace_granule(&t, 0), (size_t)2 << 20);
    ca_trace_free(&t);
    char text[4096] = HDR;
    for (int i = 0; i < 64; i++) /* 64 TiB live in 64 rows */
        snprintf(text + strlen(text), sizeof text - strlen(text), "1,%d,allocate,%d,1099511627776,0x0\n", i, i + 1);
    t = parse_ok(text);
    ck_assert_uint_eq(ca_trace_granule(&t, 0), (size_t)1 << 30); /* 64 TiB / 65536 */
    ck_assert_uint_eq(ca_trace_granule(&t, (size_t)64 << 20), (size_t)2 << 20); /* a 64 MiB device holds none */
    ca_trace_free(&t);
    t = parse_ok(HDR "1,0,allocate,0x1,18446744073709551615,0x0\n"); /* past any device: capped at what one holds */
    ck_assert_uint_eq(ca_trace_granule(&t, 0), CA_MAX_BYTES / 65536);
    ca_trace_free(&t);
}
END_TEST

START_TEST(liveness)
{
    parse_fails(HDR "1,0,free,0x10,256,0x0\n", "t.csv:2: free of pointer 0x10 that is not live");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0\n1,1,free,0x10,256,0x0\n1,2,free,0x10,256,0x0\n",
                "t.csv:4: free of pointer 0x10 that is not live");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0\n1,1,free,16,256,0x0\n1,2,free,0x10,0,0x0\n",
                "t.csv:4: free of pointer 0x10 that is not live"); /* 16 == 0x10 */
    parse_fails(HDR "1,0,allocate,0x10,256,0x0\n1,1,allocate,0x20,256,0x0\n"
                    "1,2,allocate,0x10,512,0x0\n",
                "t.csv:4: pointer 0x10 allocated again while live (allocated at line 2)");
    parse_fails(HDR "1,0,allocate,0x10,0,0x0\n", "t.csv:2: allocate of size 0");
    parse_fails(HDR "1,0,allocate,0x10,256,0x0\n1,1,free,0x10,255,0x0\n",
                "t.csv:3: free of 255 bytes, but pointer 0x10 has 256 (line 2)");
    /* A failed allocation makes nothing live. */
    parse_fails(HDR "1,0,allocate failure,0x10,256,0x0\n1,1,free,0x10,256,0x0\n",
                "t.csv:3: free of pointer 0x10 that is not live");
    /* Freed, then allocated again: fine. */
    ca_trace t = parse_ok(HDR "1,0,allocate,0x10,256,0x0\n1,1,free,0x10,256,0x0\n"
                              "1,2,allocate,0x10,256,0x0\n");
    ck_assert_uint_eq(t.n_ids, 1);
    ck_assert_uint_eq(t.live_at_end, 1);
    ca_trace_free(&t);
}
END_TEST

START_TEST(files_and_errors)
{
    ca_trace t;
    char err[256];
    ck_assert_int_eq(ca_trace_parse_file("/nonexistent/x.csv", &t, err, sizeof err), -1);
    ck_assert_str_eq(err, "/nonexistent/x.csv:0: cannot open: No such file or directory");
    ck_assert_ptr_null(t.ops);
    ck_assert_int_eq(ca_trace_parse_file("/", &t, err, sizeof err), -1); /* a directory */
    ck_assert_ptr_nonnull(strstr(err, "/:0: cannot read"));

    /* The name in messages is the path. */
    char path[] = "/tmp/ca_trace_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(HDR "1,0,allocate,0x10,256,0x0\n1,1,bogus,0x10,256,0x0\n", f);
    fclose(f);
    ck_assert_int_eq(ca_trace_parse_file(path, &t, err, sizeof err), -1);
    char want[300];
    snprintf(want, sizeof want, "%s:3: unknown action 'bogus' (allocate, free, allocate failure, iteration)",
             path);
    ck_assert_str_eq(err, want);
    unlink(path);

    /* A short message buffer is cut and terminated; no buffer at all is fine. */
    const char *bad = HDR "1,0,free,0x10,256,0x0\n";
    char small[12];
    ck_assert_int_eq(ca_trace_parse_buffer("t.csv", bad, strlen(bad), &t, small, sizeof small), -1);
    ck_assert_str_eq(small, "t.csv:2: fr");
    ck_assert_int_eq(ca_trace_parse_buffer("t.csv", bad, strlen(bad), &t, NULL, 0), -1);
    ck_assert_int_eq(ca_trace_parse_buffer("t.csv", bad, strlen(bad), NULL, err, sizeof err), -1);
    ck_assert_int_eq(ca_trace_parse_buffer(NULL, NULL, 0, &t, err, sizeof err), -1);
    ck_assert_str_eq(err, "trace:1: empty trace: expected the header "
                          "'Thread,Time,Action,Pointer,Size,Stream'");
    /* Only len bytes are read: what follows is not part of the trace. */
    const char *cut = HDR "1,0,allocate,0x10,256,0x0\nGARBAGE";
    t = (ca_trace){0};
    ck_assert_int_eq(ca_trace_parse_buffer("t.csv", cut, strlen(cut) - 7, &t, err, sizeof err), 0);
    ck_assert_uint_eq(t.n_ops, 1);
    ca_trace_free(&t);
    ca_trace_free(NULL);
}
END_TEST

/* A log whose writer was killed mid-line: its last line, with no newline
 * after it, is left out and named; the rows before it stand. The same line
 * anywhere else, or ended by a newline, is an error. */
/* trace.csv.gz reads as trace.csv (a trace kept compressed); a cut or
 * corrupt stream is one line naming the file and what is wrong with it. */
START_TEST(gzipped_file)
{
    const char *csv = HDR "1,0,allocate,0x10,256,0x0\n1,1,free,0x10,256,0x0\n"
                          "1,2,allocate,0x20,512,0x7\n";
    char dir[] = "/tmp/ca_trace_gz_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char plain[64], gz[64], cut[64], cmd[512];
    snprintf(plain, sizeof plain, "%s/t.csv", dir);
    snprintf(gz, sizeof gz, "%s/t.csv.gz", dir);
    snprintf(cut, sizeof cut, "%s/cut.csv.gz", dir);
    FILE *f = fopen(plain, "w");
    fputs(csv, f);
    fclose(f);
    /* gzip -c, as people compress a trace; the first 30 bytes of it, cut short. */
    snprintf(cmd, sizeof cmd, "gzip -c %s > %s && head -c 30 %s > %s", plain, gz, gz, cut);
    ck_assert_int_eq(system(cmd), 0);
    ca_trace t;
    char err[256];
    ck_assert_int_eq(ca_trace_parse_file(gz, &t, err, sizeof err), 0);
    ck_assert_uint_eq(t.n_ops, 3);
    ck_assert_uint_eq(t.ops[2].size, 512);
    ca_trace_free(&t);
    ck_assert_int_eq(ca_trace_parse_file(cut, &t, err, sizeof err), -1);
    char want[128];
    snprintf(want, sizeof want, "%s:0: gzip: the compressed data is cut short (truncated)", cut);
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(t.ops);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(cut_last_line)
{
    static const char rows[] = HDR "1,0,allocate,0x10,256,0x0\n1,1,allocate failure,0x0,5368709120,0x0\n";
    static const char *const cuts[] = {"1,2,free,0x1", "1,2,fr", "1", "1,2,free,0x10,256,0x", "1,2,allocate,0x10,3,0x0"};
    static const char *const why[] = {"expected 6 fields, found 4", "expected 6 fields, found 3",
                                      "expected 6 fields, found 1", "bad Stream '0x': expected a hex (0x...) or decimal number",
                                      "pointer 0x10 allocated again while live (allocated at line 2)"};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        char text[256], want[160];
        snprintf(text, sizeof text, "%s%s", rows, cuts[i]);
        ca_trace t = parse_ok(text);
        ck_assert_uint_eq(t.cut_line, 4);
        ck_assert_str_eq(t.cut_why, why[i]);
        ck_assert_uint_eq(t.n_ops, 2);
        ck_assert_uint_eq(t.count[CA_TRACE_ALLOC_FAIL], 1);
        ck_assert_uint_eq(t.live_at_end, 1);
        char *msg;
        size_t len;
        FILE *f = open_memstream(&msg, &len);
        ca_trace_warn_cut(&t, "tool", "t.csv", f);
        fclose(f);
        snprintf(want, sizeof want, "tool: t.csv:4: warning: the last line is cut short");
        ck_assert_msg(!strncmp(msg, want, strlen(want)) && strchr(msg, '\n') == msg + len - 1, "%s", msg);
        ck_assert_msg(strstr(msg, why[i]) && strstr(msg, "the 2 rows before it are read"), "%s", msg);
        free(msg);
        ca_trace_free(&t);
        /* ended by a newline, or followed by more rows: a bad row, refused */
        snprintf(text, sizeof text, "%s%s\n", rows, cuts[i]);
        snprintf(want, sizeof want, "t.csv:4: %s", why[i]);
        parse_fails(text, want);
        snprintf(text, sizeof text, "%s%s\n1,3,free,0x10,256,0x0", rows, cuts[i]);
        parse_fails(text, want);
    }
    /* a whole last row without a newline is simply the last row */
    ca_trace t = parse_ok(HDR "1,0,allocate,0x10,256,0x0\n1,1,free,0x10,256,0x0");
    ck_assert_uint_eq(t.cut_line, 0);
    ck_assert_uint_eq(t.n_ops, 2);
    ca_trace_free(&t);
    /* a header cut short is not a log at all */
    parse_fails("Thread,Time,Act", "t.csv:1: bad header: expected 'Thread,Time,Action,Pointer,Size,Stream'");
}
END_TEST

/* Bytes flipped, cut and inserted at random: an error or a trace, never a crash
 * (the sanitizer build checks every access). */
START_TEST(mangled_input_never_crashes)
{
    const char *good = HDR "1,0,allocate,0x10,256,0x0\n1,1,allocate,0x20,512,0x0\n"
                           "1,2,free,0x10,256,0x0\n1,3,iteration,,1,0x0\n"
                           "1,4,allocate failure,0x0,9,0x0\n1,5,free,0x20,0,0x0\n";
    size_t n = strlen(good);
    static const char alphabet[] = ",\n\r 0x9aZ-.\0\xff";
    srand(12345);
    int ok = 0, failed = 0;
    for (int iter = 0; iter < 20000; iter++) {
        char *buf = malloc(n + 8);
        memcpy(buf, good, n);
        size_t len = n;
        for (int m = 0; m < 1 + rand() % 4; m++) {
            size_t at = (size_t)rand() % len;
            switch (rand() % 3) {
            case 0: buf[at] = alphabet[rand() % (sizeof alphabet - 1)]; break;
            case 1: len = at; break;
            default:
                if (len < n + 8) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = alphabet[rand() % (sizeof alphabet - 1)];
                    len++;
                }
            }
            if (len == 0) break;
        }
        ca_trace t;
        char err[128];
        if (ca_trace_parse_buffer("m.csv", buf, len, &t, err, sizeof err) == 0) {
            for (size_t i = 0; i < t.n_ops; i++)
                if (t.ops[i].kind == CA_TRACE_ALLOC || t.ops[i].kind == CA_TRACE_FREE)
                    ck_assert_uint_lt(t.ops[i].id, t.n_ids);
            ca_trace_free(&t);
            ok++;
        } else {
            ck_assert_msg(strncmp(err, "m.csv:", 6) == 0, "%s", err);
            failed++;
        }
        free(buf);
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(failed, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, real_traces);
    tcase_add_test(tc, every_action_and_field_form);
    tcase_add_test(tc, tolerated_layout);
    tcase_add_test(tc, bad_header);
    tcase_add_test(tc, unknown_action);
    tcase_add_test(tc, wrong_number_of_fields);
    tcase_add_test(tc, bad_numbers);
    tcase_add_test(tc, sixty_four_bits_exactly);
    tcase_add_test(tc, peak_live_bytes_never_wraps);
    tcase_add_test(tc, granule_follows_rows);
    tcase_add_test(tc, liveness);
    tcase_add_test(tc, files_and_errors);
    tcase_add_test(tc, gzipped_file);
    tcase_add_test(tc, cut_last_line);
    tcase_add_test(tc, mangled_input_never_crashes);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}
