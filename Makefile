# GitOps Reverser — build, test and try it locally. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
BIN_DIR ?= bin

FUZZTIME ?= 30s

.PHONY: help
help: ## Show this help.
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the operator binary into bin/.
	go build -o $(BIN_DIR)/gitops-reverser ./cmd/gitops-reverser

.PHONY: manifests
manifests: ## Regenerate CRDs, RBAC and deepcopy code with controller-gen.
	@echo "controller-gen $(CONTROLLER_GEN_VERSION): generating (first run builds it, about a minute)" >&2
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=gitops-reverser paths="./gitops/...;./watcher/...;./webhook/...;./certs/...;./cmd/..." output:rbac:artifacts:config=config/rbac

.PHONY: lint
lint: ## gofmt, go vet, and a check that generated files are up to date.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	@$(MAKE) --no-print-directory manifests >/dev/null
	@if [ -n "$$(git status --porcelain -- api config)" ]; then echo "generated files are stale; run 'make manifests' and commit:"; git status --porcelain -- api config; exit 1; fi

.PHONY: envtest
envtest: ## Build (once per user) the kube-apiserver and etcd used by tests and the demo.
	@test/tools/envtest-assets.sh

.PHONY: test
test: lint ## Run every test: unit, envtest suites and the e2e suite (builds envtest assets first).
	@assets=$$(test/tools/envtest-assets.sh); \
	echo "envtest assets: $$assets"; \
	KUBEBUILDER_ASSETS=$$assets go test -count=1 -timeout 30m ./...

.PHONY: fuzz
fuzz: ## Run each fuzz target (YAML editor, object conversion, ownership parser, tree encoder, Kustomize references, folder verdict, saved index, sops file check) for FUZZTIME (default 30s); `make test` replays their corpora.
	@for t in 'manifest FuzzUpsert$$' 'manifest FuzzObjectUpsert' 'manifest FuzzEdit' 'manifest FuzzRemove' 'manifest FuzzObjectValue' 'manifest FuzzSequenceEntryFilter' 'sanitize FuzzDropUnowned' 'repo FuzzEncodeTree' 'layout FuzzKustomizeOutside' 'layout FuzzAnalyze' 'batch FuzzFromSaved' 'encrypt FuzzIsEncrypted'; do \
		set -- $$t; echo "fuzzing $$2 for $(FUZZTIME)"; \
		go test ./gitops/$$1 -run '^$$' -fuzz "$$2" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s -parallel 1 || exit 1; \
	done

.PHONY: bench
bench: ## Run the micro-benchmarks of gitops/, then those of test/bench, which each print their side-by-side ratio against its goal.
	@assets=$$(test/tools/envtest-assets.sh); \
	KUBEBUILDER_ASSETS=$$assets go test -run '^$$' -bench . -benchmem ./gitops/... && \
	KUBEBUILDER_ASSETS=$$assets go test -timeout 30m -run '^$$' -bench . -benchtime=1x ./test/bench/

.PHONY: demo
demo: ## Local control plane + local Git repo + the operator + a sample change; prints the commit. DEMO_KEEP=1 keeps it running, DEMO_VERBOSE=1 shows the operator's logs.
	@assets=$$(test/tools/envtest-assets.sh) && \
	echo "building $(BIN_DIR)/gitops-reverser" >&2 && \
	go build -o $(BIN_DIR)/gitops-reverser ./cmd/gitops-reverser && \
	KUBEBUILDER_ASSETS=$$assets $(BIN_DIR)/gitops-reverser dev $(if $(filter 1 true yes,$(DEMO_KEEP)),--keep-running) $(if $(filter 1 true yes,$(DEMO_VERBOSE)),-v)
