# The two commands of the README:
#   make demo   run the relay end to end on embedded defaults
#   make test   install what is missing, start PostgreSQL + S3, vet, test
.PHONY: demo test bench build vet fuzz

build:
	go build -o bin/relay ./cmd/relay

demo: build
	./bin/relay demo --events 20000 $(ARGS)

test:
	bash scripts/test.sh

vet:
	go vet ./...

bench:
	bash scripts/bench.sh

fuzz:
	bash scripts/fuzz.sh
