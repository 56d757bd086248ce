/* embed MODEL PROMPT N: prints PROMPT and its greedy continuation of N
 * tokens, the text `turbokv run -m MODEL -p PROMPT -n N --temp 0` prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbokv/turbokv.h>

static bool print_text(const char* text, size_t len, void* user_data) {
  (void)user_data;
  return fwrite(text, 1, len, stdout) == len;
}

static int fail(const char* what) {
  fprintf(stderr, "embed: %s: %s\n", what, tkv_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: embed MODEL PROMPT N\n");
    return 2;
  }
  if (tkv_abi_version() != TKV_ABI_VERSION) {
    fprintf(stderr, "embed: libturbokv ABI %d, built against %d\n", tkv_abi_version(),
            TKV_ABI_VERSION);
    return 1;
  }
  const char* prompt = argv[2];
  const long n = strtol(argv[3], NULL, 10);
  tkv_engine* engine = NULL;
  if (tkv_engine_load(argv[1], NULL, &engine) != TKV_OK) return fail("load");

  int rc = 1;
  tkv_sequence* seq = NULL;
  int32_t* tokens = NULL;
  size_t n_tokens = 0;
  /* First call: how many tokens; second: the tokens. */
  tkv_status st = tkv_tokenize(engine, prompt, strlen(prompt), true, true, NULL, 0, &n_tokens);
  if (st != TKV_OK && st != TKV_ERR_BUFFER_TOO_SMALL) {
    fail("tokenize");
    goto done;
  }
  tokens = malloc((n_tokens + 1) * sizeof *tokens);
  if (!tokens || tkv_tokenize(engine, prompt, strlen(prompt), true, true, tokens, n_tokens,
                              &n_tokens) != TKV_OK) {
    fail("tokenize");
    goto done;
  }
  /* The prompt as `turbokv run` echoes it. */
  size_t len = 0;
  tkv_detokenize(engine, tokens, n_tokens, NULL, 0, &len);
  char* echo = malloc(len + 1);
  if (!echo || tkv_detokenize(engine, tokens, n_tokens, echo, len + 1, &len) != TKV_OK) {
    free(echo);
    fail("detokenize");
    goto done;
  }
  fwrite(echo, 1, len, stdout);
  free(echo);

  if (tkv_sequence_new(engine, &seq) != TKV_OK || tkv_eval(seq, tokens, n_tokens, NULL) != TKV_OK) {
    fail("prompt");
    goto done;
  }
  tkv_generate_params params = tkv_generate_default_params();
  params.max_tokens = n;
  params.sampling.temperature = 0; /* greedy */
  tkv_generate_result result;
  if (tkv_generate(seq, &params, print_text, NULL, &result) != TKV_OK) {
    fail("generate");
    goto done;
  }
  if (result.n_generated > 0) fputc('\n', stdout);
  rc = 0;
done:
  free(tokens);
  tkv_sequence_free(seq);
  tkv_engine_free(engine);
  return rc;
}
