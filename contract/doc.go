// Package contract keeps event contracts, the JSON Schemas of the events a
// topic carries, and checks events against them: where they are published
// (outbox.Writer.Contracts), wherever rows become a topic's events (the
// relay's stream, and the first start's snapshot, `relay bootstrap
// --recover` and `relay rebuild`, all through Cache.Judge, so an event is
// refused alike on every path), and where consumers read them.
//
// # Registry
//
// A contract is a JSON Schema for one (topic, event type, version), kept
// in the store's catalog (package catalog, keys built by catalog.Key):
//
//	_deltabus/contracts/<topic>/policy.json            Policy: on-violation, strict
//	_deltabus/contracts/<topic>/<type>/mode.json       the type's compatibility mode
//	_deltabus/contracts/<topic>/<type>/<version>.json  the schema, naming its draft
//
// Event types are any text; catalog.EncodeType writes one as a safe key
// segment ("OrderPlaced" -> "_order_placed") and says why that encoding.
// Versions are ten digits wide, so a listing is in version order.
//
// # Drafts
//
// A schema is read in the draft its "$schema" names: draft-04, -06, -07,
// 2019-09 or 2020-12 (any other is refused). A schema without one is
// draft-07 (DefaultDraft), as Confluent Schema Registry reads it, unless
// its registration asks for another (Registration.Draft, `relay contract
// register --draft`). Validation of events, the compatibility check and
// the personal-data marks all follow that draft. Where the drafts differ
// for events: before 2019-09 a $ref ends its schema object (keywords
// beside it are ignored) and "format" is asserted ("date-time", "email"...
// refuse what does not match), from 2019-09 on "format" only annotates;
// a tuple is "items" as an array with "additionalItems" up to 2019-09,
// "prefixItems" with "items" in 2020-12. Personal-data marks are read
// wherever any draft places a schema (package classify), so a mark is
// never missed for the draft a schema was written in.
//
// The draft is recorded with the schema itself: Register stores a schema
// without "$schema" with the one of its draft inserted as its first
// member, every other byte as given (WithDraft). So the record is written
// in the same put-if-absent as the schema, cannot be lost or raced, and
// anything that reads the store reads the schema as the relay does. A
// stored schema without "$schema" was registered before draft-07 was the
// default, when such schemas were read as draft 2020-12, and is read so
// still (LegacyDraft): by the relay, which logs it once, by the checker
// judging the type's next version, by `relay contract show`, which says
// so. A registry's contents never change meaning under it. Registering
// such a schema again as it was is still a no-op.
//
// Registry.Register guarantees:
//
//   - Immutable: a version is written with storage put-if-absent and never
//     replaced. Registering an equal schema again (the same bytes, or the
//     same JSON value formatted differently, read in the same draft) is a
//     no-op; a different one, or the same in another draft, is refused. Of
//     two processes registering one version with different schemas at
//     once, exactly one lands; the other is told so.
//   - Contiguous: a type's versions are 1, 2, 3, ...: version N can be
//     registered only when N-1 is the latest. So the versions a new one is
//     judged against are all present and can never change under the
//     judgement, and concurrent registrations of N and N+1 cannot both pass
//     on a view that lacks the other.
//   - Judged: a new version is checked by package compat against the
//     type's registered versions under its mode (BACKWARD by default), each
//     read in its own draft, and refused, with every difference, when
//     incompatible. Nothing is written by a refusal, nor for a malformed
//     schema, a reserved topic, an unknown mode or a bad version.
//   - Self-contained: a schema may refer only to its own parts ($ref
//     "#/$defs/x"); any other reference, which the validator would fetch,
//     is refused, and so is a schema over MaxSchemaBytes.
//
// # Validation
//
// Each schema is compiled once by github.com/santhosh-tekuri/jsonschema/v6
// (a maintained validator, tested on the JSON Schema test suite of every
// draft above, each compiled with its draft as the default). That library
// validates decoded documents (map[string]any trees): about a hundred
// allocations for a 200-byte event. The relay checks events at hundreds of
// thousands per second, so Validate first runs a byte-level validator
// compiled from the library's own compiled schema (fast.go): it reads the
// payload's JSON text in place and allocates nothing. It is sound in both
// directions and answers unsure whenever it cannot tell (keywords it does
// not evaluate, such as uniqueItems, dependencies, unevaluated*, contains,
// $recursiveRef;
// strings with escapes; numbers at a bound's float rounding; duplicate
// keys), and everything but a certain "valid" is decided by the library,
// which writes the error. So the library has the last word on every
// refusal, and the fast path can only save work; TestFastAgreesWithLibrary
// and FuzzFastAgreesWithLibrary check that it never contradicts the
// library. A Violation names the topic, type, version and the first
// failing value's JSON pointer (the first by document path, since the
// library's order of an object's properties is random).
//
// # Caching and freshness
//
// A Cache is the registry as relays and producers use it: the listing of
// the contracts folder, kept in memory, and the compiled schemas of the
// versions met (at most Options.MaxSchemas). New versions and policies are
// seen without a restart in two ways, both bounded:
//
//   - Polling: the whole folder is listed every Options.Poll (30 s: one
//     List request, about 86,000 a month, $0.43 on S3).
//   - On demand: an event of a registered type naming a version the cache
//     has not seen re-lists that type's folder, and an event of a type
//     without contracts in a strict topic re-lists that topic's folder, at
//     most once per Options.Refresh (1 s) per registered type or strict
//     topic. So a producer that registers version N and publishes at once
//     is not refused for up to a poll interval, and a type's first
//     contract is enforced within one poll.
//
// Rows are written by anyone who can write the outbox, so the values that
// key a lookup (topic, type, version) are hostile: a lookup is map
// lookups in memory, a type or topic the registry does not know costs no
// read, and the reads a row can cause are bounded as above, whatever it
// holds; every schema read was listed first and is refused unread above
// MaxSchemaBytes. An object under the contracts folder that no
// registration wrote (one that does not compile) fails the check loudly,
// naming its key, instead of passing or refusing events.
//
// # Directories
//
// Producers may embed their contracts instead of reading the store
// (FromDir), as <topic>/<type>/<version>.json files with an optional
// <topic>/policy.json; a file without "$schema" is draft-07, as register
// reads it. `relay contract check --dir` compares such a directory with
// the registry, and names the draft a file must declare where the
// registry reads its version in another (a legacy 2020-12 one).
package contract
