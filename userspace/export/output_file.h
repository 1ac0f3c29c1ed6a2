// Writing an output file so that it is never destroyed nor left half-written: the data
// goes to a temporary file in the target's directory, which replaces the target (rename)
// only once all of it is on disk. A full disk, a read-only directory, an exception in the
// writer or a kill in the middle leave the target as it was.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace pbp {

// Calls fill(out) to produce the content of path, then:
//  - the temporary file (".NAME.tmp-XXXXXX" next to NAME, created with O_CREAT|O_EXCL and
//    mode 0666 & ~umask, like any new file) is flushed and fsync'ed, renamed over path, and
//    the directory fsync'ed;
//  - on any failure the temporary file is removed, path is left untouched and error is the
//    short cause ("No space left on device", "Read-only file system", an exception's text);
//  - temporary files of path that an earlier writer, killed, left behind are removed first:
//    the writer holds an flock on its temporary file until the rename, and a file whose lock
//    is free and that has not changed for a second has no writer.
// A symbolic link at path is followed: the file it points to is replaced, the link kept.
// A path that exists and is not a regular file (/dev/null, a FIFO, a terminal) is written
// to directly, as there is nothing to replace.
bool write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& fill,
                           std::string& error);

}  // namespace pbp
