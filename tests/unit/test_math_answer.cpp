// The maths verifier: final answers of GSM8K- and MATH-style solutions and responses, their
// normal form, and matching by value.
#include <QtTest>

#include "rl/math_answer.hpp"

using namespace fp8rl;

class TestMathAnswer : public QObject {
  Q_OBJECT
 private slots:
  void finalAnswers() {
    struct Case {
      const char* text;
      std::optional<std::string> want;
    };
    const Case cases[] = {
        {"Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72", "72"},
        {"so the total is 1,234.\n####  1,234  \nextra", "1,234"},
        {"We get $x = \\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}"},
        {"first \\boxed{1} then \\boxed{ {2} + 3 }", " {2} + 3 "},  // the last box, nested braces
        {"\\boxed{\\text{(B)}} and #### 7", "\\text{(B)}"},         // a box wins over ####
        {"\\fbox{12}", "12"},
        {"no answer here", std::nullopt},
        {"\\boxed{unbalanced", std::nullopt},
        {"####", std::nullopt},
    };
    for (const Case& c : cases) QVERIFY2(final_answer(c.text) == c.want, c.text);
  }

  void matching() {
    struct Case {
      const char* given;
      const char* reference;
      bool match;
    };
    const Case cases[] = {
        {"72", "72", true},
        {"72.0", "72", true},
        {"1,234", "1234", true},
        {"$1234$", "1234", true},
        {"\\dfrac{3}{4}", "\\frac{3}{4}", true},
        {"0.75", "\\frac{3}{4}", true},
        {"3/4", "\\frac34", false},  // \frac34 without braces is not read
        {"-\\frac{1}{2}", "-0.5", true},
        {"\\left( 1, 2 \\right)", "(1,2)", true},
        {"x = 5", "5", true},
        {"90^\\circ", "90", true},
        {"50\\%", "50", true},
        {"10 \\text{ cm}", "10cm", true},
        {"\\text{(B)}", "(B)", true},
        {"1,2,3", "123", false},  // a list, not a thousands separator
        {"73", "72", false},
        {"", "0", false},
        {"\\frac{1}{0}", "1", false},
    };
    for (const Case& c : cases)
      QVERIFY2(answers_match(c.given, c.reference) == c.match,
               qPrintable(QStringLiteral("%1 vs %2").arg(c.given, c.reference)));
    QCOMPARE(answer_value("\\frac{-3}{4}").value_or(0), -0.75);
    QVERIFY(!answer_value("x^2").has_value());
  }
};

QTEST_GUILESS_MAIN(TestMathAnswer)
#include "test_math_answer.moc"
