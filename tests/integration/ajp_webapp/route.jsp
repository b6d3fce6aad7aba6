<%@ page contentType="text/plain" session="false" trimDirectiveWhitespaces="true" %>
<%
  // Which Tomcat answered (its Engine's jvmRoute), and the session it found, if any.
  jakarta.servlet.http.HttpSession s = request.getSession(request.getParameter("create") != null);
  out.println("node=" + System.getProperty("test.node"));
  out.println("session=" + (s == null ? "none" : s.getId()));
%>
