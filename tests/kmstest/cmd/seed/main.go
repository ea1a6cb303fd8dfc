// Command seed prints the local-kms seed file of tests/kmstest (Seed), for
// scripts/services.sh.
package main

import (
	"fmt"

	"github.com/deltabus/deltabus/tests/kmstest"
)

func main() { fmt.Print(kmstest.Seed) }
