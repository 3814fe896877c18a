// Checkpoint folders written all-or-nothing and checked on reading: CRC-32C against its
// reference value on both code paths, write_checkpoint_dir replacing a folder as a whole (a
// writer that fails part-way leaves the previous checkpoint), the fallback's DIR.previous found
// by readers, a folder that is no checkpoint never replaced, and verify_checkpoint naming a
// file that is truncated, changed or missing.
#include <QtTest>

#include <QTemporaryDir>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "error_of.hpp"
#include "model/checkpoint.hpp"

using namespace fp8rl;
namespace fs = std::filesystem;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

class TestCheckpointFiles : public QObject {
  Q_OBJECT
 private slots:
  void crc32cReferenceValues() {
    QCOMPARE(crc32c("123456789", 9), 0xe3069283u);  // the standard check value
    QCOMPARE(crc32c("", 0), 0u);
    // Any split continues to the same sum; lengths that are not multiples of 8 included.
    std::string s(1000, '\0');
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 131 + 7);
    const uint32_t whole = crc32c(s.data(), s.size());
    for (size_t cut : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(333), s.size()})
      QCOMPARE(crc32c(s.data() + cut, s.size() - cut, crc32c(s.data(), cut)), whole);
    QTemporaryDir dir;
    const std::string path = dir.filePath("f").toStdString();
    write_file(path, s);
    QCOMPARE(file_checksum(path).crc32c, whole);
    QCOMPARE(file_checksum(path).bytes, uint64_t(1000));
  }

  void replacesTheFolderAsAWhole() {
    QTemporaryDir tmp;
    const std::string dir = tmp.filePath("ckpt").toStdString();
    write_checkpoint_dir(dir, [](const std::string& d) {
      write_file(d + "/trainer_state.json", "{\"step\": 1}");
      write_file(d + "/a.bin", "first");
      write_file(d + "/old_only.bin", "x");
    });
    QVERIFY(fs::exists(dir + "/checksums.json"));
    verify_checkpoint(dir);
    write_checkpoint_dir(dir, [](const std::string& d) {
      write_file(d + "/trainer_state.json", "{\"step\": 2}");
      write_file(d + "/a.bin", "second");
    });
    verify_checkpoint(dir);
    QCOMPARE(QString::fromStdString(read_text_file(dir + "/a.bin")), QString("second"));
    QVERIFY(!fs::exists(dir + "/old_only.bin"));  // no file of the previous checkpoint stays
    QVERIFY(!fs::exists(dir + ".partial") && !fs::exists(dir + ".previous"));
  }

  void aWriterThatFailsLeavesThePreviousCheckpoint() {
    QTemporaryDir tmp;
    const std::string dir = tmp.filePath("ckpt").toStdString();
    write_checkpoint_dir(
        dir, [](const std::string& d) { write_file(d + "/trainer_state.json", "{\"step\": 1}"); });
    const QString e = error_of([&] {
      write_checkpoint_dir(dir, [](const std::string& d) {
        write_file(d + "/trainer_state.json", "{\"step\": 2}");
        throw Error("disk full");
      });
    });
    QVERIFY2(e.startsWith("disk full"), qPrintable(e));
    QCOMPARE(QString::fromStdString(read_text_file(dir + "/trainer_state.json")),
             QString("{\"step\": 1}"));
    verify_checkpoint(dir);
    QVERIFY(!fs::exists(dir + ".partial"));
    // A killed writer's .partial is thrown away by the next write.
    fs::create_directories(dir + ".partial");
    write_file(dir + ".partial/junk", "x");
    write_checkpoint_dir(
        dir, [](const std::string& d) { write_file(d + "/trainer_state.json", "{\"step\": 3}"); });
    QVERIFY(!fs::exists(dir + "/junk") && !fs::exists(dir + ".partial"));
  }

  // The two-rename fallback, killed between its renames: only DIR.previous exists.
  void readersFindThePreviousFolder() {
    QTemporaryDir tmp;
    const std::string dir = tmp.filePath("ckpt").toStdString();
    write_checkpoint_dir(dir,
                         [](const std::string& d) { write_file(d + "/trainer_state.json", "{}"); });
    QCOMPARE(QString::fromStdString(checkpoint_dir_to_read(dir)), QString::fromStdString(dir));
    fs::rename(dir, dir + ".previous");
    QCOMPARE(QString::fromStdString(checkpoint_dir_to_read(dir)),
             QString::fromStdString(dir + ".previous"));
    fs::remove_all(dir + ".previous");
    QVERIFY(error_of([&] { checkpoint_dir_to_read(dir); }).contains("does not exist"));
  }

  void neverReplacesAFolderThatIsNoCheckpoint() {
    QTemporaryDir tmp;
    const std::string dir = tmp.filePath("mine").toStdString();
    fs::create_directories(dir);
    write_file(dir + "/notes.txt", "my notes");
    const QString e = error_of([&] {
      write_checkpoint_dir(dir, [](const std::string& d) { write_file(d + "/x", "y"); });
    });
    QVERIFY2(e.contains("holds files but no checkpoint"), qPrintable(e));
    QCOMPARE(QString::fromStdString(read_text_file(dir + "/notes.txt")), QString("my notes"));
  }

  void damagedFilesAreNamed() {
    QTemporaryDir tmp;
    const std::string dir = tmp.filePath("ckpt").toStdString();
    write_checkpoint_dir(dir, [](const std::string& d) {
      write_file(d + "/trainer_state.json", "{}");
      write_file(d + "/model.safetensors", std::string(4096, 'w'));
    });
    fs::resize_file(dir + "/model.safetensors", 4000);
    QString e = error_of([&] { verify_checkpoint(dir); });
    QVERIFY2(e.contains("model.safetensors has 4000 bytes") && e.contains("records 4096"),
             qPrintable(e));
    write_file(dir + "/model.safetensors", std::string(4095, 'w') + "W");
    e = error_of([&] { verify_checkpoint(dir); });
    QVERIFY2(e.contains("model.safetensors has CRC-32C"), qPrintable(e));
    fs::remove(dir + "/model.safetensors");
    e = error_of([&] { verify_checkpoint(dir); });
    QVERIFY2(e.contains("model.safetensors is missing"), qPrintable(e));
    // A folder without checksums.json (from elsewhere) is not checked.
    fs::remove(dir + "/checksums.json");
    verify_checkpoint(dir);
  }
};

QTEST_GUILESS_MAIN(TestCheckpointFiles)
#include "test_checkpoint_files.moc"
