package topic

import (
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
)

// fastSnappy is arrow-go's snappy codec with the plain (not "better")
// encoder: the same Snappy format any reader decodes, for about half the
// encoding CPU, which was a sixth of a bootstrap's; files come out a few
// percent larger. Decoding is unchanged.
type fastSnappy struct{ compress.Codec }

func (fastSnappy) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

func (fastSnappy) EncodeLevel(dst, src []byte, _ int) []byte { return s2.EncodeSnappy(dst, src) }

func init() {
	codec, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		panic(err)
	}
	compress.RegisterCodec(compress.Codecs.Snappy, fastSnappy{codec})
}
