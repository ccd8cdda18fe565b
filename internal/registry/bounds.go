package registry

// MaxNameBytes is the longest name pvans answers, waits for, searches
// through or keeps from a listing (issue 40: a constant, not a setting):
// pvAccessCPP refuses channel names over 500 bytes, so a longer one is no
// client's.
const MaxNameBytes = 500
