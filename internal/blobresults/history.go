package blobresults

// HistoryFallback is the ResultHistory declaration's text on the Azure
// backends that keep records in a container: the history is added up by
// the portable layer from ListResults.
const HistoryFallback = "the records are listed a page at a time (the container's listing, then one download per unexpired record, 16 at a time) and added up by jobq: " +
	"every record the container keeps is read, whatever the window, so a window takes minutes at tens of thousands of records (10,000 took 2 minutes against Azurite); " +
	"the dashboard keeps such a result 10 times as long as it took"
