#define _GNU_SOURCE /* memmem */
/* The C ABI end to end, as a C program uses it: run by tests/c_api.rs (compiled with cc,
 * then run again under valgrind). Prints each check; exits 1 at the first that fails. */
#include "sprig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks = 0;

#define CHECK(cond)                                                              \
  do {                                                                           \
    checks++;                                                                    \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);  \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* A call that must succeed; on failure print its message. */
#define OK(call)                                                                 \
  do {                                                                           \
    char *err_ = NULL;                                                           \
    enum SprigStatus s_ = (call);                                                \
    (void)err_;                                                                  \
    checks++;                                                                    \
    if (s_ != SPRIG_STATUS_OK) {                                                 \
      fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call, s_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* A call that must fail with `want`, its message handed out and freed. */
static void expect_status(enum SprigStatus got, enum SprigStatus want, char *err,
                          const char *what, int line) {
  checks++;
  if (got != want) {
    fprintf(stderr, "sprig_test.c:%d: %s gave %d, wanted %d (%s)\n", line, what, got, want,
            err ? err : "no message");
    exit(1);
  }
  if (want != SPRIG_STATUS_OK && (err == NULL || strlen(err) == 0)) {
    fprintf(stderr, "sprig_test.c:%d: %s gave no message\n", line, what);
    exit(1);
  }
  if (err) CHECK(sprig_string_free(err) == SPRIG_STATUS_OK);
}
#define FAILS(want, call_with_err)                                               \
  do {                                                                           \
    char *err = NULL;                                                            \
    enum SprigStatus s_ = (call_with_err);                                       \
    expect_status(s_, want, err, #call_with_err, __LINE__);                      \
  } while (0)

static void key(uint8_t out[32], uint8_t n) {
  memset(out, 0, 32);
  out[0] = n;
  out[31] = (uint8_t)(n * 7);
}

/* --- first steps (the README's example is this function) --- */
static void first_steps(const char *dir) {
  SprigDb db;
  SprigBatch batch;
  SprigPending pending;
  SprigCommitInfo info;
  SprigView view;
  SprigBuf value;
  bool found;
  uint8_t alice[32];
  char *err = NULL;

  if (sprig_open(dir, NULL, &db, &err) != SPRIG_STATUS_OK) {
    fprintf(stderr, "open: %s\n", err);
    sprig_string_free(err);
    exit(1);
  }
  sprig_key_path(db, (const uint8_t *)"alice", 5, alice, NULL);
  sprig_begin(db, &batch, NULL);
  sprig_batch_put(batch, NULL, alice, (const uint8_t *)"100", 3, NULL);
  sprig_batch_finish(batch, &pending, NULL);
  sprig_commit(db, pending, &info, NULL); /* durable when it returns */
  sprig_view(db, &view, NULL);
  sprig_view_get(view, NULL, alice, &value, &found, NULL);
  printf("alice = %.*s at version %llu\n", (int)value.len, value.data,
         (unsigned long long)info.seq);
  sprig_buf_free(&value);
  sprig_view_free(view, NULL);
  sprig_close(db, NULL);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sprig_test <empty directory>\n");
    return 2;
  }
  const char *dir = argv[1];
  first_steps(dir);

  SprigOptions opts;
  SprigDb db_refused;
  OK(sprig_options_default(&opts));
  CHECK(opts.create_if_missing && opts.sync_always && opts.retained_versions == 4);
  CHECK(opts.segment_bytes == 64 << 20 && opts.checkpoint_log_bytes == 64 << 20);
  CHECK(!opts.background_checkpoints && opts.auto_clean && opts.recycled_segments == 2);
  CHECK(opts.max_space_amplification == 2.0 && opts.max_overlay_bytes == (uint64_t)4 << 30);
  opts.io_uring = false; /* plain reads: the program also runs under valgrind */
  opts.direct_io = false;
  opts.page_cache_bytes = 1 << 20;
  opts.checkpoint_log_bytes = 4096; /* a checkpoint after every commit or two */
  opts.background_checkpoints = true;
  opts.recycled_segments = 0;

  /* Options the engine refuses are refused at open, with a message. */
  SprigOptions bad = opts;
  bad.segment_bytes = 12345;
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_open_in_memory(&bad, &db_refused, &err));
  bad = opts;
  bad.max_space_amplification = 1.0;
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_open_in_memory(&bad, &db_refused, &err));
  bad = opts;
  bad.checkpoint_log_bytes = 0;
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_open(dir, &bad, &db_refused, &err));

  SprigDb db;
  OK(sprig_open(dir, &opts, &db, NULL));
  uint8_t root[32], root2[32], alice[32];
  uint64_t seq = 0;
  OK(sprig_root(db, root, &seq, NULL));
  CHECK(seq == 1);
  OK(sprig_key_path(db, (const uint8_t *)"alice", 5, alice, NULL));

  /* Tables and a batch touching several, with put, upsert and delete. */
  OK(sprig_create_table(db, "balances", "add-u64", NULL));
  OK(sprig_create_table(db, "code", NULL, NULL));
  FAILS(SPRIG_STATUS_ALREADY_EXISTS, sprig_create_table(db, "code", NULL, &err));
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_create_table(db, "x", "no-such-resolver", &err));
  SprigBuf names;
  OK(sprig_tables(db, &names, NULL));
  CHECK(names.len > 0 && memmem(names.data, names.len, "balances\n", 9) != NULL);
  OK(sprig_buf_free(&names));

  uint8_t k[32];
  uint64_t five = 5, seven = 7;
  SprigBatch batch;
  OK(sprig_begin(db, &batch, NULL));
  for (uint8_t i = 0; i < 50; i++) {
    key(k, i);
    OK(sprig_batch_put(batch, NULL, k, &i, 1, NULL));
  }
  OK(sprig_batch_upsert(batch, "balances", alice, (const uint8_t *)&five, 8, NULL));
  OK(sprig_batch_upsert(batch, "balances", alice, (const uint8_t *)&seven, 8, NULL));
  OK(sprig_batch_put(batch, "code", alice, (const uint8_t *)"wasm", 4, NULL));
  OK(sprig_batch_delete(batch, NULL, alice, NULL));
  FAILS(SPRIG_STATUS_NOT_FOUND, sprig_batch_put(batch, "nope", alice, NULL, 0, &err));
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT,
        sprig_batch_upsert(batch, "code", alice, (const uint8_t *)"x", 1, &err));
  SprigPending pending;
  OK(sprig_batch_finish(batch, &pending, NULL));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_batch_put(batch, NULL, k, NULL, 0, &err));
  uint8_t proot[32];
  OK(sprig_pending_root(pending, proot, NULL));
  SprigBuf witness;
  OK(sprig_pending_witness(pending, &witness, NULL));
  CHECK(witness.len > 0);
  size_t proven = 0;
  OK(sprig_verify_witness(SPRIG_HASHER_BLAKE3, witness.data, witness.len, root, &proven, NULL));
  CHECK(proven == 51); /* 50 puts and alice's delete */
  FAILS(SPRIG_STATUS_PROOF_INVALID,
        sprig_verify_witness(SPRIG_HASHER_BLAKE3, witness.data, witness.len, proot, NULL, &err));
  OK(sprig_buf_free(&witness));
  SprigCommitInfo info;
  OK(sprig_commit(db, pending, &info, NULL));
  CHECK(info.seq == 4 && memcmp(info.root, proot, 32) == 0);
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_commit(db, pending, NULL, &err)); /* consumed */

  /* Reads: one key, many keys, another table, an older version. */
  SprigView view;
  OK(sprig_view(db, &view, NULL));
  SprigBuf v;
  bool found = false;
  key(k, 9);
  OK(sprig_view_get(view, NULL, k, &v, &found, NULL));
  CHECK(found && v.len == 1 && v.data[0] == 9);
  OK(sprig_buf_free(&v));
  OK(sprig_view_get(view, NULL, alice, &v, &found, NULL));
  CHECK(!found && v.len == 0);
  OK(sprig_view_get(view, "balances", alice, &v, &found, NULL));
  uint64_t total = 0;
  CHECK(found && v.len == 8);
  memcpy(&total, v.data, 8);
  CHECK(total == 12);
  OK(sprig_buf_free(&v));
  uint8_t many[3 * 32];
  key(many, 1);
  key(many + 32, 200);
  key(many + 64, 49);
  SprigBuf values[3];
  bool founds[3];
  OK(sprig_view_get_many(view, NULL, many, 3, values, founds, NULL));
  CHECK(founds[0] && !founds[1] && founds[2] && values[2].data[0] == 49);
  for (int i = 0; i < 3; i++) OK(sprig_buf_free(&values[i]));

  /* Proofs: present and absent keys verify; a wrong value or a flipped byte does not. */
  uint8_t vroot[32];
  OK(sprig_view_root(view, vroot, &seq, NULL));
  CHECK(seq == 4 && memcmp(vroot, info.root, 32) == 0);
  key(k, 9);
  SprigBuf proof;
  OK(sprig_view_prove(view, k, &proof, NULL));
  uint8_t nine = 9, eight = 8;
  OK(sprig_verify_path_proof(SPRIG_HASHER_DEFAULT, proof.data, proof.len, vroot, k, &nine, 1, NULL));
  FAILS(SPRIG_STATUS_PROOF_INVALID, sprig_verify_path_proof(SPRIG_HASHER_DEFAULT, proof.data,
                                                            proof.len, vroot, k, &eight, 1, &err));
  FAILS(SPRIG_STATUS_PROOF_INVALID, sprig_verify_path_proof(SPRIG_HASHER_DEFAULT, proof.data,
                                                            proof.len, vroot, k, NULL, 0, &err));
  proof.data[proof.len - 1] ^= 1;
  FAILS(SPRIG_STATUS_PROOF_INVALID, sprig_verify_path_proof(SPRIG_HASHER_DEFAULT, proof.data,
                                                            proof.len, vroot, k, &nine, 1, &err));
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_verify_path_proof(77, proof.data, proof.len, vroot,
                                                               k, &nine, 1, &err));
  OK(sprig_buf_free(&proof));
  OK(sprig_view_prove(view, alice, &proof, NULL));
  OK(sprig_verify_path_proof(SPRIG_HASHER_BLAKE3, proof.data, proof.len, vroot, alice, NULL, 0, NULL));
  OK(sprig_buf_free(&proof));

  /* A later commit does not change the view; view_at reads an older version. */
  OK(sprig_begin(db, &batch, NULL));
  key(k, 9);
  OK(sprig_batch_delete(batch, NULL, k, NULL));
  OK(sprig_batch_finish(batch, &pending, NULL));
  /* A batch built on the pending one, then committed: commits both. */
  SprigBatch child;
  OK(sprig_pending_begin(pending, &child, NULL));
  key(k, 10);
  OK(sprig_batch_delete(child, NULL, k, NULL));
  SprigPending child_pending;
  OK(sprig_batch_finish(child, &child_pending, NULL));
  OK(sprig_pending_free(pending, NULL)); /* the child still holds what it needs */
  OK(sprig_commit(db, child_pending, &info, NULL));
  CHECK(info.seq == 6);
  key(k, 9);
  OK(sprig_view_get(view, NULL, k, &v, &found, NULL));
  CHECK(found);
  OK(sprig_buf_free(&v));
  SprigView old;
  OK(sprig_view_at(db, 4, &old, NULL));
  OK(sprig_view_get(old, NULL, k, &v, &found, NULL));
  CHECK(found);
  OK(sprig_buf_free(&v));
  OK(sprig_view_free(old, NULL));
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_view_at(db, 1000, &old, &err));

  /* A stale pending batch: begun before another commit. */
  SprigBatch a, b;
  SprigPending pa, pb;
  OK(sprig_begin(db, &a, NULL));
  OK(sprig_begin(db, &b, NULL));
  OK(sprig_batch_put(a, NULL, k, (const uint8_t *)"a", 1, NULL));
  OK(sprig_batch_put(b, NULL, k, (const uint8_t *)"b", 1, NULL));
  OK(sprig_batch_finish(a, &pa, NULL));
  OK(sprig_batch_finish(b, &pb, NULL));
  OK(sprig_commit(db, pa, NULL, NULL));
  FAILS(SPRIG_STATUS_STALE, sprig_commit(db, pb, NULL, &err));

  SprigStats stats;
  OK(sprig_stats(db, &stats, NULL));
  CHECK(stats.seq == 7 && stats.entries == 50 - 2 + 1 + 2 && stats.commits >= 4);

  /* Misuse: null pointers, wrong handle kinds, use after close, double free. */
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_open(NULL, NULL, &db, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_root(db, NULL, NULL, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_view_get(view, NULL, NULL, &v, &found, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_view_get(view, NULL, k, NULL, &found, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_key_path(db, NULL, 3, root2, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_begin(db, NULL, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_stats(db, NULL, &err));
  CHECK(sprig_buf_free(NULL) == SPRIG_STATUS_NULL_POINTER);
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_root(view, root2, NULL, &err)); /* a view, not a db */
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_view_free(db, &err));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_root(0, root2, NULL, &err));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_root(987654321, root2, NULL, &err));
  SprigDb other;
  FAILS(SPRIG_STATUS_LOCKED, sprig_open(dir, &opts, &other, &err)); /* open in this process */
  OK(sprig_view_free(view, NULL));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_view_free(view, &err)); /* double free */
  OK(sprig_close(db, NULL));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_close(db, &err)); /* double close */
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_begin(db, &batch, &err)); /* use after close */
  SprigBuf stale = {0};
  CHECK(sprig_buf_free(&stale) == SPRIG_STATUS_OK); /* empty: nothing to do */
  uint8_t not_ours[4];
  SprigBuf forged = {not_ours, 4};
  CHECK(sprig_buf_free(&forged) == SPRIG_STATUS_INVALID_HANDLE);
  CHECK(sprig_string_free((char *)not_ours) == SPRIG_STATUS_INVALID_HANDLE);

  /* Reopen: the same state and root come back from disk. */
  OK(sprig_open(dir, &opts, &db, NULL));
  OK(sprig_stats(db, &stats, NULL));
  CHECK(stats.seq == 7 && stats.entries == 51);
  OK(sprig_close(db, NULL));

  /* The commit pipeline: batches committed in order while the next one is built. */
  SprigPipeline pipe;
  SprigPending pipe_pending;
  SprigBatch pipe_batch;
  uint8_t pipe_roots[5][32];
  bool committed = true;
  OK(sprig_open_in_memory(NULL, &db, NULL));
  OK(sprig_pipeline(db, 2, &pipe, NULL));
  OK(sprig_pipeline_flush(pipe, &info, &committed, NULL));
  CHECK(!committed); /* nothing submitted yet */
  for (uint8_t n = 1; n <= 5; n++) {
    OK(sprig_pipeline_begin(pipe, &pipe_batch, NULL)); /* on the batch submitted before */
    if (n > 1) { /* it sees that batch's change, durable or not; the read joins its witness */
      key(k, (uint8_t)(100 + n - 1));
      OK(sprig_batch_get(pipe_batch, NULL, k, &v, &found, NULL));
      CHECK(found && v.len == 1 && v.data[0] == n - 1);
      OK(sprig_buf_free(&v));
    }
    if (n == 3) { /* several keys read together through the batch, one of them absent */
      uint8_t two[64];
      SprigBuf two_values[2];
      bool two_found[2];
      key(two, 102);
      key(two + 32, 200);
      OK(sprig_batch_get_many(pipe_batch, NULL, two, 2, two_values, two_found, NULL));
      CHECK(two_found[0] && two_values[0].len == 1 && two_values[0].data[0] == 2);
      CHECK(!two_found[1] && two_values[1].len == 0);
      OK(sprig_buf_free(&two_values[0]));
      OK(sprig_buf_free(&two_values[1]));
      FAILS(SPRIG_STATUS_NULL_POINTER,
            sprig_batch_get_many(pipe_batch, NULL, two, 2, NULL, two_found, &err));
    }
    key(k, (uint8_t)(100 + n));
    OK(sprig_batch_put(pipe_batch, NULL, k, &n, 1, NULL));
    OK(sprig_batch_finish(pipe_batch, &pipe_pending, NULL));
    OK(sprig_pending_root(pipe_pending, pipe_roots[n - 1], NULL));
    if (n == 5) { /* its witness proves the read and the write against the root it began on */
      OK(sprig_pending_witness(pipe_pending, &witness, NULL));
      proven = 0;
      OK(sprig_verify_witness(SPRIG_HASHER_BLAKE3, witness.data, witness.len, pipe_roots[3],
                              &proven, NULL));
      CHECK(proven == 2);
      OK(sprig_buf_free(&witness));
    }
    OK(sprig_pipeline_submit(pipe, pipe_pending, NULL)); /* returns before it is durable */
  }
  OK(sprig_pipeline_wait_durable(pipe, 3, &info, NULL));
  CHECK(info.seq >= 3);
  OK(sprig_pipeline_flush(pipe, &info, &committed, NULL));
  CHECK(committed && info.seq == 5 && memcmp(info.root, pipe_roots[4], 32) == 0);
  OK(sprig_root(db, root2, &seq, NULL));
  CHECK(seq == 5 && memcmp(root2, pipe_roots[4], 32) == 0);
  OK(sprig_view(db, &view, NULL));
  key(k, 103);
  OK(sprig_view_get(view, NULL, k, &v, &found, NULL));
  CHECK(found && v.len == 1 && v.data[0] == 3);
  OK(sprig_buf_free(&v));
  OK(sprig_view_free(view, NULL));
  /* A batch not begun on the pipeline's latest batch is refused, and its handle consumed. */
  SprigBatch stray;
  SprigPending stray_pending;
  OK(sprig_begin(db, &stray, NULL)); /* on version 5 */
  OK(sprig_pipeline_begin(pipe, &pipe_batch, NULL));
  OK(sprig_batch_finish(pipe_batch, &pipe_pending, NULL));
  OK(sprig_pipeline_submit(pipe, pipe_pending, NULL)); /* block 6: the tip moves on */
  OK(sprig_batch_finish(stray, &stray_pending, NULL));
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_pipeline_submit(pipe, stray_pending, &err));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_pending_free(stray_pending, &err)); /* consumed */
  FAILS(SPRIG_STATUS_INVALID_ARGUMENT, sprig_pipeline_wait_durable(pipe, 99, NULL, &err));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_pipeline_begin(db, &pipe_batch, &err)); /* a db */
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_pipeline_begin(pipe, NULL, &err));
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_batch_get(stray, NULL, k, &v, &found, &err));
  FAILS(SPRIG_STATUS_NULL_POINTER, sprig_pipeline(db, 2, NULL, &err));
  OK(sprig_pipeline_free(pipe, NULL)); /* waits for block 6 */
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_pipeline_free(pipe, &err)); /* double free */
  FAILS(SPRIG_STATUS_INVALID_HANDLE, sprig_pipeline_flush(pipe, NULL, NULL, &err));
  OK(sprig_root(db, root2, &seq, NULL));
  CHECK(seq == 6);
  OK(sprig_close(db, NULL));

  /* An in-memory database and a missing directory without create. */
  OK(sprig_open_in_memory(NULL, &db, NULL));
  OK(sprig_root(db, root2, &seq, NULL));
  CHECK(seq == 0);
  OK(sprig_close(db, NULL));
  opts.create_if_missing = false;
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  FAILS(SPRIG_STATUS_NOT_FOUND, sprig_open(missing, &opts, &db, &err));

  /* Everything handed out was freed (pa was consumed; pb by its failed commit). */
  size_t open_handles = 1, buffers = 1, strings = 1;
  OK(sprig_outstanding(&open_handles, &buffers, &strings));
  if (open_handles || buffers || strings) {
    fprintf(stderr, "outstanding: %zu handles, %zu buffers, %zu strings\n", open_handles,
            buffers, strings);
    return 1;
  }
  printf("all %d checks passed\n", checks);
  return 0;
}
