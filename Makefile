# The two commands of the README:
#   make demo   run the relay end to end on embedded defaults (installs PostgreSQL 15 if missing)
#   make test   install what is missing, start PostgreSQL + S3, vet, test
.PHONY: demo test bench build vet fuzz

build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/relay ./cmd/relay

demo: build
	bash scripts/deps.sh postgres
	./bin/relay demo --events 20000 $(ARGS)

test:
	bash scripts/test.sh

vet:
	go vet ./...

bench: build
	bash scripts/bench.sh

fuzz:
	bash scripts/fuzz.sh
