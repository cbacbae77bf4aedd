// Element types of tensors (f32, f16, i32, u32, u8, bool) and their C++ counterparts.
#pragma once

#include <tilebsp/core/half.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tilebsp {

/// The element types a tensor can hold.
enum class ElementType : std::uint8_t { f32, f16, i32, u32, u8, boolean };

inline constexpr ElementType f32 = ElementType::f32;
inline constexpr ElementType f16 = ElementType::f16;
inline constexpr ElementType i32 = ElementType::i32;
inline constexpr ElementType u32 = ElementType::u32;
inline constexpr ElementType u8 = ElementType::u8;
inline constexpr ElementType boolean = ElementType::boolean;

/// Bytes per element.
constexpr std::size_t size_of(ElementType t) noexcept {
  switch (t) {
    case ElementType::f32:
    case ElementType::i32:
    case ElementType::u32: return 4;
    case ElementType::f16: return 2;
    case ElementType::u8:
    case ElementType::boolean: return 1;
  }
  return 0;
}

constexpr std::string_view name_of(ElementType t) noexcept {
  switch (t) {
    case ElementType::f32: return "f32";
    case ElementType::f16: return "f16";
    case ElementType::i32: return "i32";
    case ElementType::u32: return "u32";
    case ElementType::u8: return "u8";
    case ElementType::boolean: return "bool";
  }
  return "?";
}

namespace core::detail {
template <class T>
struct element_type_of {};
template <> struct element_type_of<float> : std::integral_constant<ElementType, ElementType::f32> {};
template <> struct element_type_of<half> : std::integral_constant<ElementType, ElementType::f16> {};
template <> struct element_type_of<std::int32_t> : std::integral_constant<ElementType, ElementType::i32> {};
template <> struct element_type_of<std::uint32_t> : std::integral_constant<ElementType, ElementType::u32> {};
template <> struct element_type_of<std::uint8_t> : std::integral_constant<ElementType, ElementType::u8> {};
template <> struct element_type_of<bool> : std::integral_constant<ElementType, ElementType::boolean> {};
}  // namespace core::detail

/// A C++ type that tensors can hold: float, half, int32_t, uint32_t, uint8_t, bool.
template <class T>
concept ElementLike = requires { core::detail::element_type_of<std::remove_cv_t<T>>::value; };

/// The ElementType of a C++ element type.
template <ElementLike T>
inline constexpr ElementType element_type_v = core::detail::element_type_of<std::remove_cv_t<T>>::value;

}  // namespace tilebsp
