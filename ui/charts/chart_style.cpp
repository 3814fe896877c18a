#include "ui/charts/chart_style.hpp"

#include <QLabel>
#include <charconv>
#include <cmath>
#include <iterator>

namespace fp8rl::ui {

QColor seriesColor(size_t i) {
  static const QColor kPalette[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e),
                                    QColor(0x2c, 0xa0, 0x2c), QColor(0xd6, 0x27, 0x28),
                                    QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
                                    QColor(0xe3, 0x77, 0xc2), QColor(0x7f, 0x7f, 0x7f),
                                    QColor(0xbc, 0xbd, 0x22), QColor(0x17, 0xbe, 0xcf)};
  return kPalette[i % std::size(kPalette)];
}

QLabel* makeTitleLabel(const QString& title, QWidget* parent) {
  auto* label = new QLabel(title, parent);
  label->setObjectName(QStringLiteral("title"));
  QFont bold = label->font();
  bold.setBold(true);
  label->setFont(bold);
  return label;
}

QString csvNumber(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return QString::fromLatin1(buf, static_cast<int>(res.ptr - buf));
}

QString csvField(const QString& s) {
  if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
      !s.contains(QLatin1Char('\n')))
    return s;
  QString q = s;
  q.replace(QStringLiteral("\""), QStringLiteral("\"\""));
  return QLatin1Char('"') + q + QLatin1Char('"');
}

}  // namespace fp8rl::ui
