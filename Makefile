# sessiond — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/sessiond/sessiond/daemon.Version=$(VERSION) -X main.version=$(VERSION)
# make run keeps its home inside the repository unless SESSIOND_HOME is set.
SESSIOND_HOME ?= $(CURDIR)/.home
export SESSIOND_HOME

# make install PREFIX=~/.local (default /usr/local); DESTDIR for packaging.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(PREFIX)/bin

.PHONY: help build run fake-model test test-acp test-ts test-short bench load lint fmt clean install uninstall

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build bin/sessiond, bin/sessionctl, bin/sessiond-load and bin/sessiond-fakemodel.
	@mkdir -p "$(BIN)"
	$(GO) build -ldflags '$(LDFLAGS)' -o "$(BIN)/" ./cmd/...

run: build ## Run the daemon on $SESSIOND_HOME (default ./.home); Ctrl-C stops it gracefully.
	$(BIN)/sessiond --home "$(SESSIOND_HOME)"

fake-model: build ## Serve a fake model on 127.0.0.1:8399 to try sessiond without one; prints the config lines.
	$(BIN)/sessiond-fakemodel $(FAKE_MODEL_ARGS)

test: ## Run every test, journeys included, under the race detector, then the Node tests (ACP editor, TypeScript client); 15-30 minutes on 2 cores (the crash-point journeys are most of it).
	$(GO) test -race -count=1 -timeout 45m ./...
	$(GO) test -race -count=1 -tags faultinject -run 'TestFault' ./store/
	$(MAKE) test-acp
	$(MAKE) test-ts

# The ACP bridge played by an editor on the official @agentclientprotocol/sdk
# (test/acp; needs Node 20+ and npm). It runs the binaries of bin/, the
# bridge built with -race (a data race it reports fails the test).
test-acp: build ## Run the Node test of `sessionctl acp` (npm ci on first use).
	@command -v node >/dev/null || { echo "make test-acp needs Node.js 20+ (apt-get install nodejs npm)"; exit 1; }
	@[ -d test/acp/node_modules/@agentclientprotocol/sdk ] || (cd test/acp && npm ci --no-audit --no-fund)
	$(GO) build -race -ldflags '$(LDFLAGS)' -o $(BIN)/race/ ./cmd/sessionctl
	cd test/acp && ACP_SESSIONCTL=$(CURDIR)/$(BIN)/race/sessionctl node --test

test-ts: build ## Run the Node tests of the TypeScript client @sessiond/client against bin/sessiond, then pack it, install the tarball and run its README quick start (npm ci on first use).
	@command -v node >/dev/null || { echo "make test-ts needs Node.js 20+ (apt-get install nodejs npm)"; exit 1; }
	@[ -d clients/typescript/node_modules ] || (cd clients/typescript && npm ci --no-audit --no-fund)
	cd clients/typescript && npm test
	cd clients/typescript && SESSIOND_BIN=$(CURDIR)/$(BIN)/sessiond npm run check-pack

test-short: ## Run every test without the race detector (faster; before a commit, run make test).
	$(GO) test -count=1 -timeout 20m ./...

bench: ## Run the benchmarks once each (see docs/performance.md for the figures).
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./... 2>&1 | tee bench.out

# make load LOAD_ARGS='--clients 1000 --duration 60s' — see docs/performance.md.
LOAD_ARGS ?= --clients 100 --duration 10s
load: build ## Run bin/sessiond-load against a daemon it spawns (LOAD_ARGS='--mode idle --clients 10000' ...).
	$(BIN)/sessiond-load --spawn $(BIN)/sessiond $(LOAD_ARGS)

# staticcheck is built by go run from the Go module proxy, pinned here (no
# go.mod entry; its build and its analysis are cached in the Go build cache).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## Check formatting (gofmt), run go vet and staticcheck, and build for macOS, which has no sandbox (the daemon fails closed there; see the README) (.ci/run runs it before make test).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags faultinject ./store/ ./cmd/sessiond/
	GOOS=darwin $(GO) build ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags faultinject ./store/

fmt: ## Format the Go sources.
	gofmt -w $$(git ls-files '*.go')

install: build ## Install sessiond and sessionctl, shell completion and a systemd user unit under PREFIX (default /usr/local).
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(PREFIX)/share/bash-completion/completions" \
		"$(DESTDIR)$(PREFIX)/share/zsh/site-functions" "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d" \
		"$(DESTDIR)$(PREFIX)/lib/systemd/user"
	install -m 0755 "$(BIN)/sessiond" "$(BIN)/sessionctl" "$(DESTDIR)$(BINDIR)/"
	"$(BIN)/sessionctl" completion bash > "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/sessionctl"
	"$(BIN)/sessionctl" completion zsh > "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_sessionctl"
	"$(BIN)/sessionctl" completion fish > "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/sessionctl.fish"
	sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/sessiond.service > "$(DESTDIR)$(PREFIX)/lib/systemd/user/sessiond.service"
	@echo "installed under $(DESTDIR)$(PREFIX); as a service: systemctl --user daemon-reload && systemctl --user enable --now sessiond"

uninstall: ## Remove what make install put under PREFIX.
	rm -f "$(DESTDIR)$(BINDIR)/sessiond" "$(DESTDIR)$(BINDIR)/sessionctl" \
		"$(DESTDIR)$(PREFIX)/share/bash-completion/completions/sessionctl" \
		"$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_sessionctl" \
		"$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/sessionctl.fish" \
		"$(DESTDIR)$(PREFIX)/lib/systemd/user/sessiond.service"

clean: ## Remove build output (not .home).
	rm -rf $(BIN) bench.out test/acp/node_modules
