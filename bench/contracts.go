package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/storage"
)

// payloadContract is the contract of payloadSQL's events: every field
// required, typed and bounded, the lines' items a closed model, the sku a
// pattern, the currency an enum. The fast path decides all of it.
const payloadContract = `{"type":"object","required":["order_id","customer","amount","currency","lines","note"],
	"properties":{"order_id":{"type":"integer","minimum":0},"customer":{"type":"string","minLength":1,"maxLength":64},
	"amount":{"type":"number","minimum":0},"currency":{"enum":["EUR","USD","GBP"]},
	"lines":{"type":"array","minItems":1,"items":{"type":"object","required":["sku","qty"],
	"properties":{"sku":{"type":"string","pattern":"^sku-[0-9]+$"},"qty":{"type":"integer","minimum":1}},"additionalProperties":false}},
	"note":{"type":"string","maxLength":200}},"additionalProperties":false}`

// benchTopics are the topics insertRowsSQL writes.
var benchTopics = []string{"orders", "payments", "tenants", "ingestion", "quality"}

// checkAllValid fails when the relay with contracts dead-lettered any
// event: the measurement would then not be of valid events.
func checkAllValid(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "_dead_letter")); err == nil {
		return fmt.Errorf("the relay with contracts sent events to _dead_letter in %s: the benchmark's contract does not fit its payload", dir)
	}
	return nil
}

// registerContracts registers schema (payloadContract, or with personal
// data personalContract or its unmarked twin) for every topic's type in
// the store at dir, before the drain: every event the drain reads is then
// checked against it.
func registerContracts(ctx context.Context, dir, schema string) error {
	if !strings.Contains(dir, "://") {
		dir = "file://" + dir
	}
	st, err := storage.Open(ctx, dir, storage.S3Options{})
	if err != nil {
		return err
	}
	reg := contract.NewRegistry(st, nil)
	for _, t := range benchTopics {
		if _, err := reg.Register(ctx, contract.Registration{Topic: t, Type: "Created", Version: 1, Schema: []byte(schema)}); err != nil {
			return fmt.Errorf("register the benchmark's contract of %s: %w", t, err)
		}
	}
	return nil
}
