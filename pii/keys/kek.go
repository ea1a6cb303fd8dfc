package keys

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tink-crypto/tink-go-awskms/v3/integration/awskms"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/insecurecleartextkeyset"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/tink"

	"github.com/deltabus/deltabus/usererr"
)

// KEK is the key-encryption key: it wraps the root key of the key table.
type KEK struct {
	tink.AEAD
	// ID names the KEK without revealing it: "file keyset <primary key
	// id>" or the KMS key URI. The key table records it, so a wrong KEK
	// is reported by name.
	ID string
}

const kekHelp = "set DELTABUS_KEK=file:///path/to/kek.json (create one with `relay keys init --kek-file /path/to/kek.json`) or DELTABUS_KEK=aws-kms://arn:aws:kms:REGION:ACCOUNT:key/ID"

// OpenKEK opens the KEK named by uri: file:///path (a Tink AEAD keyset in
// JSON, readable by its owner only, as `relay keys init` writes it) or
// aws-kms://arn:aws:kms:... (AWS KMS through tink-go-awskms, with the
// SDK's usual credentials, region from the ARN and endpoint from
// AWS_ENDPOINT_URL_KMS when set). Every error is a usererr naming the fix.
func OpenKEK(ctx context.Context, uri string) (*KEK, error) {
	switch {
	case uri == "":
		return nil, usererr.New(nil, "no KEK: personal data is encrypted under keys the KEK wraps; %s", kekHelp)
	case strings.HasPrefix(uri, "file://"):
		return openFileKEK(uri)
	case strings.HasPrefix(uri, "aws-kms://"):
		a, err := awskms.NewAEADWithContext(ctx, strings.TrimPrefix(uri, "aws-kms://"))
		if err != nil {
			return nil, usererr.New(err, "DELTABUS_KEK %s: %v; the URI must look like aws-kms://arn:aws:kms:REGION:ACCOUNT:key/ID", uri, err)
		}
		return &KEK{AEAD: kmsAEAD{a}, ID: uri}, nil
	}
	return nil, usererr.New(nil, "DELTABUS_KEK %q is neither file:// nor aws-kms://; %s", redactURI(uri), kekHelp)
}

func openFileKEK(uri string) (*KEK, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
		return nil, usererr.New(err, "DELTABUS_KEK %q is not a file URL; write it as file:///absolute/path/kek.json", uri)
	}
	path := u.Path
	fi, err := os.Stat(path)
	if err != nil {
		return nil, usererr.New(err, "KEK file %s cannot be read: %v; %s", path, unwrapPath(err), kekHelp)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, usererr.New(nil, "KEK file %s is readable by others (mode %04o): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usererr.New(err, "KEK file %s cannot be read: %v", path, unwrapPath(err))
	}
	defer f.Close()
	h, err := insecurecleartextkeyset.Read(keyset.NewJSONReader(f))
	if err != nil {
		return nil, usererr.New(err, "KEK file %s is not a Tink keyset: write one with `relay keys init --kek-file %s`", path, path)
	}
	a, err := aead.New(h)
	if err != nil {
		return nil, usererr.New(err, "KEK file %s holds no AEAD key (AES-256-GCM): write one with `relay keys init --kek-file NEWFILE`", path)
	}
	return &KEK{AEAD: a, ID: fmt.Sprintf("file keyset %d", h.KeysetInfo().GetPrimaryKeyId())}, nil
}

// WriteKEKFile writes a new KEK (a Tink AES-256-GCM keyset, JSON) to path
// with mode 0600. It never overwrites: losing a KEK loses every key it
// wraps.
func WriteKEKFile(path string) (id string, err error) {
	h, err := keyset.NewHandle(aead.AES256GCMKeyTemplate())
	if err != nil {
		return "", fmt.Errorf("new KEK: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", usererr.New(err, "%s exists: a KEK is never overwritten (the keys it wraps would be lost); choose another file", path)
		}
		return "", usererr.New(err, "cannot create KEK file %s: %v", path, unwrapPath(err))
	}
	if err := insecurecleartextkeyset.Write(h, keyset.NewJSONWriter(f)); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("write KEK file %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("write KEK file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write KEK file %s: %w", path, err)
	}
	return fmt.Sprintf("file keyset %d", h.KeysetInfo().GetPrimaryKeyId()), nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// redactURI keeps a URI's scheme only: an unknown scheme might carry a secret.
func redactURI(uri string) string {
	if i := strings.Index(uri, "://"); i >= 0 {
		return uri[:i] + "://..."
	}
	return "(not a URI)"
}

// kmsTimeout bounds one KMS call: a KMS that does not answer must not
// hang the relay.
const kmsTimeout = 30 * time.Second

// kmsAEAD calls the KMS with a deadline.
type kmsAEAD struct{ a tink.AEADWithContext }

func (k kmsAEAD) Encrypt(pt, ad []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kmsTimeout)
	defer cancel()
	ct, err := k.a.EncryptWithContext(ctx, pt, ad)
	if err != nil {
		return nil, fmt.Errorf("KMS encrypt: %w", err)
	}
	return ct, nil
}

func (k kmsAEAD) Decrypt(ct, ad []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kmsTimeout)
	defer cancel()
	pt, err := k.a.DecryptWithContext(ctx, ct, ad)
	if err != nil {
		return nil, fmt.Errorf("KMS decrypt: %w", err)
	}
	return pt, nil
}
