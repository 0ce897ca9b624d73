// Holds a SQLite database's write lock, as another program sharing the file would:
//   node hold-write-lock.cjs <driver path> <database file> <milliseconds>
// prints "locked" once it holds the lock, and exits once it has let it go.
const [driverPath, file, milliseconds] = process.argv.slice(2)
const Database = require(driverPath)
const db = new Database(file)
db.exec('BEGIN IMMEDIATE')
process.stdout.write('locked\n')
setTimeout(() => { db.exec('ROLLBACK'); db.close() }, Number(milliseconds))
