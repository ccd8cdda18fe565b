package registry

// MaxNameBytes is the longest name pvans answers, waits for, searches
// through or keeps from a listing (issue 40: a constant, not a setting):
// pvAccessCPP refuses channel names over 500 bytes, so a longer one is no
// client's.
const MaxNameBytes = 500

// FieldNames: a name nobody claims exactly, of the form "rec.FIELD", is
// answered with the server that claims "rec" (issue 40: always, not a
// setting). QSRV serves every field of its records as a channel and lists
// only the records; the fallback is taken only when no server claims the
// exact name, so it never overrides a claim, and turning it off could only
// lose answers.
const FieldNames = true
