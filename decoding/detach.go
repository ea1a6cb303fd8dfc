package decoding

// Detach copies the row's datum data out of the decoder's input into one new
// buffer, so the row stays valid after the next Decode and after the caller
// reuses its receive buffer.
func (r *Row) Detach() {
	size := 0
	for _, d := range r.New {
		size += len(d.Data)
	}
	for _, d := range r.Old {
		size += len(d.Data)
	}
	buf := make([]byte, 0, size)
	buf = detachDatums(buf, r.New)
	detachDatums(buf, r.Old)
}

func detachDatums(buf []byte, ds []Datum) []byte {
	for i, d := range ds {
		if d.Data == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, d.Data...)
		ds[i].Data = buf[start:len(buf):len(buf)]
	}
	return buf
}

// Detach copies Content out of the decoder's input, so the message stays
// valid after the next Decode.
func (m *LogicalMessage) Detach() {
	m.Content = append(make([]byte, 0, len(m.Content)), m.Content...)
}
