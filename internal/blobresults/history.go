package blobresults

// HistoryFallback is the ResultHistory declaration's text on the Azure
// backends that keep records in a container: the history is added up by
// the portable layer from ListResults.
const HistoryFallback = "the window's records are listed a page at a time (the blob listing, then one download per record updated in the window) " +
	"and added up by jobq: every record of the container is listed and every record of the window is read, MEASURE"
