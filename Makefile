# kube-ipvs-proxy build and test entry points. `make test` is what CI runs.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
BIN := bin/kube-ipvs-proxy
PKGS := ./...

.PHONY: all build plan test unit lint bench fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/kube-ipvs-proxy

# The main job until `make demo` exists: node-a's plan for examples/.
plan: build
	./$(BIN) --dry-run --objects examples --hostname-override node-a --output text

# Every test: lint, unit tests (fuzz seed corpora included), and the dry-run
# contract on examples/.
test: lint unit

unit:
	$(GO) test -count=1 $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./policy/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 30s ./manifest/
	$(GO) test -run '^$$' -fuzz FuzzCompute -fuzztime 30s ./policy/

clean:
	rm -rf bin
