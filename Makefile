# lockgen's build. `make demo` and `make test` are the two commands of the
# README's quick start; both work on a fresh Debian machine with Go.
GO ?= go
# Every Go module of the repository (go.work ties them together).
MODULES := . runtime examples lockgenprom lockgenotel lockgenapi lockgenapi/dashboardtest
# -count=1: tests talk to a real server, never reuse cached results.
TESTFLAGS ?= -race -count=1
export TESTFLAGS
# The packages whose tests touch SQL: `make test` runs them against MySQL
# as well as MariaDB (every package runs against MariaDB).
SQL_PKGS := ./runtime/... ./lockgenprom/... ./lockgenotel/... ./lockgenapi/... ./lockgenapi/dashboardtest/... ./examples/... ./templates/... ./internal/doctor/... ./cmd/lockgen/...
MYSQL_DSN := $(or $(LOCKGEN_TEST_MYSQL_DSN),root@tcp(127.0.0.1:3307)/test)
# staticcheck 2026.2.2 (needs Go 1.26, like the root module), pinned: `go run`
# fetches it through the module proxy and caches the binary, so no module's
# go.mod requires it (the runtime keeps its few dependencies).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: help mariadb db tools bench-mysql generate check-generated test lint bench bench-cluster demo fuzz chaos chaos-cluster test-ensure cluster-test

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

mariadb: ## make sure MariaDB answers at 127.0.0.1:3306 (start or install it), unless LOCKGEN_TEST_DSN is set
	@./.ci/ensure-mariadb

db: ## make sure MariaDB answers at :3306 and MySQL 9.7 at :3307 (start or install them), unless LOCKGEN_TEST_DSN / LOCKGEN_TEST_MYSQL_DSN are set
	@./.ci/ensure-mariadb
	@./.ci/ensure-mysql

tools: ## make sure a C compiler (go test -race needs cgo) and python3 (the HTTP API's client test) are there
	@./.ci/ensure-gcc
	@./.ci/ensure-python3
	@./.ci/ensure-chromium

# The lockgen that regenerates is built with the tag lockgen_bootstrap: without
# it, lockgen links the store it generates (runtime/ops serves consumers over
# HTTP with it), and a template change would stop it from building halfway.
generate: export GOFLAGS := $(strip $(GOFLAGS) -tags=lockgen_bootstrap)
generate: ## regenerate queries/, the runtime's sqlc package and the examples' code
	$(GO) test ./templates -run TestQueriesMatchTemplates -update
	$(GO) run ./cmd/lockgen sqlc generate -f sqlc.yaml
	cd examples && $(GO) generate ./...
	cd runtime && $(GO) generate ./internal/chaos/... ./internal/genstore/...
	cd lockgenapi/dashboardtest && $(GO) generate ./...
	cd lockgenotel && $(GO) generate ./...

check-generated: generate ## fail when any generated file differs from what is committed
	@if [ -n "$$(git status --porcelain --untracked-files=all)" ]; then \
		git status --short; git --no-pager diff --stat; \
		echo "check-generated: generated files are stale: run 'make generate' and commit" >&2; exit 1; \
	fi

test: tools db lint ## gofmt, vet, staticcheck and run every test (race detector on, but for generator and cmd/lockgen) against MariaDB, and every SQL test against MySQL too
	@GO=$(GO) ./.ci/test $(SQL_PKGS)

lint: tools ## gofmt, go vet and staticcheck (STATICCHECK, pinned) over every module
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed" >&2; exit 1)
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...) || exit 1; done

test-ensure: ## check that the ensure scripts start the project's server beside another mariadbd (found by port and pid file)
	@GO=$(GO) ./.ci/test-ensure

chaos: db ## the chaos harness against MariaDB, then MySQL: CHAOS_DURATION (default 3m) of faults each, CHAOS_SEED to replay a plan
	@GO=$(GO) ./.ci/chaos $${CHAOS_DURATION:-3m}

chaos-cluster: tools ## the chaos harness against a 3-node cluster on loopback, CHAOS_CLUSTER galera (default) or group-single (MySQL Group Replication, single-primary; multi-primary groups are refused): workers spread across the nodes, node kills (the primary's too), pauses and isolations besides the process faults; CHAOS_DURATION (default 3m), CHAOS_SEED to replay
	@GO=$(GO) ./.ci/chaos-cluster $${CHAOS_DURATION:-3m} $${CHAOS_CLUSTER:-galera}

cluster-test: tools ## start a 3-node MariaDB Galera cluster and a 3-member MySQL Group Replication group on loopback and run the tests that need them (build tag cluster): single-primary, then multi-primary (refused: MySQL Bug#121063)
	@dsns=$$(./.ci/ensure-galera) && cd runtime && \
		LOCKGEN_TEST_DSN="$${dsns%%,*}" LOCKGEN_TEST_GALERA_DSNS="$$dsns" $(GO) test $(TESTFLAGS) -tags cluster -run '^TestGalera' -v .
	@dsns=$$(./.ci/ensure-group-replication single) && cd runtime && \
		LOCKGEN_TEST_DSN="$${dsns%%,*}" LOCKGEN_TEST_GR_DSNS="$$dsns" LOCKGEN_TEST_GR_MODE=single \
		$(GO) test $(TESTFLAGS) -tags cluster -run '^TestGroupReplication' -skip MultiPrimary -v .
	@dsns=$$(./.ci/ensure-group-replication multi) && cd runtime && \
		LOCKGEN_TEST_DSN="$${dsns%%,*}" LOCKGEN_TEST_GR_DSNS="$$dsns" LOCKGEN_TEST_GR_MODE=multi \
		$(GO) test $(TESTFLAGS) -tags cluster -run '^TestGroupReplicationMultiPrimaryIsRefused$$' -v .

bench: mariadb ## print the lock round-trip table, the handoff latency per strategy, the jobs table and HTTP push and consume against in-process (MariaDB)
	cd examples && $(GO) run ./bench
	cd runtime && $(GO) test -run '^$$' -bench Handoff -benchtime 500x .
	cd runtime && $(GO) test -run '^$$' -bench Hold10kLeases -benchtime 1x .
	cd runtime && $(GO) test -run '^$$' -bench JobsTable -benchtime 1x -timeout 20m ./jobs
	cd lockgenapi && $(GO) test -run '^$$' -bench HTTPTable -benchtime 1x .

bench-mysql: db ## the same tables against MySQL (LOCKGEN_TEST_MYSQL_DSN, default 127.0.0.1:3307)
	$(MAKE) bench LOCKGEN_DSN="$(MYSQL_DSN)" LOCKGEN_TEST_DSN="$(MYSQL_DSN)"

bench-cluster: tools ## the lock and jobs tables and the leader failover time on a 3-node Galera cluster and a 3-member single-primary Group Replication group, each beside one server of the same build, in one sitting (CLUSTERS: galera group-single)
	@GO=$(GO) ./.ci/bench-cluster $(CLUSTERS)

demo: mariadb ## generate the quickstart's code and run it against MariaDB
	cd examples && $(GO) generate ./quickstart && $(GO) run ./quickstart

fuzz: ## fuzz the spec loader, then job argument decoding, for a minute each
	$(GO) test ./generator/spec -run '^$$' -fuzz FuzzLoad -fuzztime 60s
	cd runtime && $(GO) test ./jobs -run '^$$' -fuzz FuzzHandleArgs -fuzztime 60s
