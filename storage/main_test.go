package storage_test

import (
	"os"
	"testing"

	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }
