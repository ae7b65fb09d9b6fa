# lockgen's build. `make demo` and `make test` are the two commands of the
# README's quick start; both work on a fresh Debian machine with Go.
GO ?= go
# Every Go module of the repository (go.work ties them together).
MODULES := . runtime examples lockgenprom
# -count=1: tests talk to a real server, never reuse cached results.
TESTFLAGS ?= -race -count=1

.PHONY: help db generate check-generated test lint bench demo fuzz

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

db: ## make sure MariaDB answers at 127.0.0.1:3306 (start or install it), unless LOCKGEN_TEST_DSN is set
	@./.ci/ensure-mariadb

generate: ## regenerate queries/, the runtime's sqlc package and the examples' code
	$(GO) test ./templates -run TestQueriesMatchTemplates -update
	$(GO) run ./cmd/lockgen sqlc generate -f sqlc.yaml
	cd examples && $(GO) generate ./...

check-generated: generate ## fail when any generated file differs from what is committed
	@if [ -n "$$(git status --porcelain --untracked-files=all)" ]; then \
		git status --short; git --no-pager diff --stat; \
		echo "check-generated: generated files are stale: run 'make generate' and commit" >&2; exit 1; \
	fi

test: db lint ## gofmt, vet and run every test (race detector on) against MariaDB
	@for m in $(MODULES); do (cd $$m && echo "== go test $$m" && $(GO) test $(TESTFLAGS) ./...) || exit 1; done

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed" >&2; exit 1)
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

bench: db ## print the lock round-trip table, the handoff latency per strategy and the jobs table
	cd examples && $(GO) run ./bench
	cd runtime && $(GO) test -run '^$$' -bench Handoff -benchtime 500x .
	cd runtime && $(GO) test -run '^$$' -bench Hold10kLeases -benchtime 1x .
	cd runtime && $(GO) test -run '^$$' -bench JobsTable -benchtime 1x -timeout 20m .

demo: db ## generate the quickstart's code and run it against MariaDB
	cd examples && $(GO) generate ./quickstart && $(GO) run ./quickstart

fuzz: ## fuzz the spec loader for a minute
	$(GO) test ./generator/spec -run '^$$' -fuzz FuzzLoad -fuzztime 60s
